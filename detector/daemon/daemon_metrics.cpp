#include "daemon_metrics.h"

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <utility>
#include <vector>

#include "reccl/detector/daemon_protocol.h"
#include "reccl_bpf/link_event.h"

#ifndef RECCL_VERSION
#define RECCL_VERSION "unknown"
#endif

namespace reccl::detector {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

namespace {
MetricFamily family(const char* name, const char* help, MetricType type) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

ClientMetric sample(double v, std::vector<ClientMetric::Label> labels, MetricType type) {
  ClientMetric m;
  m.label = std::move(labels);
  if (type == MetricType::Counter)
    m.counter.value = v;
  else
    m.gauge.value = v;
  return m;
}

// Scalar family: one sample without labels.
MetricFamily scalar(const char* name, const char* help, MetricType type, double v) {
  MetricFamily f = family(name, help, type);
  f.metric.push_back(sample(v, {}, type));
  return f;
}
}  // namespace

class DaemonMetrics::StateCollector : public prometheus::Collectable {
 public:
  StateCollector(StatusFn status, const std::atomic<int>* clients) : status_(std::move(status)), clients_(clients) {}

  std::vector<MetricFamily> Collect() const override {
    DetectorStatus st = status_();
    std::vector<MetricFamily> out;
    auto perLink = [&](const char* name, const char* help, MetricType type, auto value) {
      MetricFamily f = family(name, help, type);
      for (const auto& l : st.links)
        f.metric.push_back(sample(value(l), {{"device", l.watch.ifname}, {"netns", l.watch.netns}}, type));
      out.push_back(std::move(f));
    };
    perLink("reccl_detector_carrier_losses_total",
            "Carrier losses per watched device (the kernel's count; flaps folded by the kernel included).",
            MetricType::Counter, [](const LinkReport& l) { return static_cast<double>(l.status.flaps); });
    MetricFamily state = family("reccl_detector_link_state",
                                "Declared state of each watched link: 1 for its state, 0 for the others.",
                                MetricType::Gauge);
    for (const auto& l : st.links)
      for (LinkState s : {LinkState::kUp, LinkState::kDown, LinkState::kDegraded})
        state.metric.push_back(sample(l.status.state == s ? 1 : 0,
                                      {{"device", l.watch.ifname}, {"netns", l.watch.netns}, {"state", linkStateName(s)}},
                                      MetricType::Gauge));
    out.push_back(std::move(state));
    perLink("reccl_detector_link_suppressed", "1 while flap damping holds the link down although it is up.",
            MetricType::Gauge, [](const LinkReport& l) { return l.status.suppressed ? 1.0 : 0.0; });
    perLink("reccl_detector_link_penalty", "Flap-damping penalty of the link now.", MetricType::Gauge,
            [](const LinkReport& l) { return l.status.penalty; });
    const auto& c = st.counters;
    out.push_back(scalar("reccl_detector_ringbuf_drops_total", "Records lost because the BPF ring buffer was full.",
                         MetricType::Counter, static_cast<double>(c.bpf.ringbufDrops)));
    out.push_back(scalar("reccl_detector_ringbuf_records_total", "Records the BPF programs wrote to the ring buffer.",
                         MetricType::Counter, static_cast<double>(c.bpf.events)));
    out.push_back(scalar("reccl_detector_scan_runs_total",
                         "Firings of the BPF timer that re-reads watched devices while the kernel's link-watch work is due.",
                         MetricType::Counter, static_cast<double>(c.bpf.scanRuns)));
    out.push_back(scalar("reccl_detector_queue_overflows_total",
                         "Link events dropped because the daemon did not drain the detector's queue.",
                         MetricType::Counter, static_cast<double>(c.queueOverflows)));
    out.push_back(scalar("reccl_detector_rtnetlink_overruns_total",
                         "rtnetlink socket overruns (ENOBUFS): link messages the kernel dropped.",
                         MetricType::Counter, static_cast<double>(c.rtnlOverruns)));
    out.push_back(scalar("reccl_detector_neighbours_probed_total",
                         "ARP requests for neighbours an outage left unresolved, sent when their link came back.",
                         MetricType::Counter, static_cast<double>(c.neighboursProbed)));
    if (!st.rdmaPorts.empty()) {
      // The watched links' RDMA ports (the rdma_counters source): the kernel's totals as last read.
      auto perPort = [&](const char* name, const char* help, auto value, bool needsPackets) {
        MetricFamily f = family(name, help, MetricType::Counter);
        for (const auto& p : st.rdmaPorts) {
          if (needsPackets && !p.packets) continue;
          f.metric.push_back(sample(static_cast<double>(value(p)),
                                    {{"device", p.netdev}, {"rdma_device", p.dev}, {"port", std::to_string(p.port)}},
                                    MetricType::Counter));
        }
        if (!f.metric.empty()) out.push_back(std::move(f));
      };
      perPort("reccl_detector_rdma_sequence_errors_total",
              "Sequence errors of the RDMA port (packets lost between two RoCE ends), as the kernel counts them.",
              [](const RdmaPortReport& p) { return p.sequenceErrors; }, false);
      perPort("reccl_detector_rdma_packets_total", "Packets the RDMA port sent and received, as the kernel counts them.",
              [](const RdmaPortReport& p) { return *p.packets; }, true);
      perPort("reccl_detector_rdma_degraded_total",
              "DEGRADED signals the RDMA port's sequence errors produced (before the state machine).",
              [](const RdmaPortReport& p) { return p.verdicts; }, false);
    }
    MetricFamily src = family("reccl_detector_source_active", "1 when the source or hook is active on this kernel.",
                              MetricType::Gauge);
    for (const auto& s : st.sources) src.metric.push_back(sample(s.active ? 1 : 0, {{"source", s.name}}, MetricType::Gauge));
    out.push_back(std::move(src));
    out.push_back(scalar("reccl_detectord_clients", "Clients connected to the daemon's socket.", MetricType::Gauge,
                         clients_->load(std::memory_order_relaxed)));
    MetricFamily build = family("reccl_detectord_build_info",
                                "Always 1; the labels say which build runs and which protocols it speaks.", MetricType::Gauge);
    build.metric.push_back(sample(1, {{"version", RECCL_VERSION},
                                      {"protocol", std::to_string(kDaemonProtocolVersion)},
                                      {"bpf_abi", std::to_string(RECCL_LINK_ABI_VERSION)}},
                                  MetricType::Gauge));
    out.push_back(std::move(build));
    return out;
  }

 private:
  StatusFn status_;
  const std::atomic<int>* clients_;
};

DaemonMetrics::DaemonMetrics(StatusFn status)
    : registry_(std::make_shared<prometheus::Registry>()),
      state_(std::make_shared<StateCollector>(std::move(status), &clients_)) {
  signals_ = &prometheus::BuildCounter()
                  .Name("reccl_detector_signals_total")
                  .Help("Signals from each source before debouncing, by kind.")
                  .Register(*registry_);
  events_ = &prometheus::BuildCounter()
                 .Name("reccl_detector_events_total")
                 .Help("Link events delivered to clients, by type and first source.")
                 .Register(*registry_);
  latency_ = &prometheus::BuildHistogram()
                  .Name("reccl_detector_detection_latency_seconds")
                  .Help("First kernel signal to delivery to clients (link down and degraded).")
                  .Register(*registry_);
  refused_ = &prometheus::BuildCounter()
                  .Name("reccl_detectord_clients_refused_total")
                  .Help("Connections closed at once because of a per-user or total client limit.")
                  .Register(*registry_);
  dropped_ = &prometheus::BuildCounter()
                  .Name("reccl_detectord_clients_dropped_total")
                  .Help("Clients the daemon disconnected, by reason (malformed request, over rate, not reading).")
                  .Register(*registry_);
}

void DaemonMetrics::onSignal(const LinkSignal& s) {
  signals_->Add({{"kind", kindName(s.kind)}, {"source", sourceName(s.source)}}).Increment();
}

void DaemonMetrics::onEvent(const LinkEvent& e, uint64_t deliverNs) {
  events_->Add({{"type", linkEventTypeName(e.type)}, {"source", sourceName(e.source)}}).Increment();
  // Detection latency: from the first signal's kernel timestamp to delivery. Not for LinkUp:
  // that includes the deliberate hold-down.
  if (e.type == LinkEventType::kLinkUp || !e.signalNs || deliverNs < e.signalNs) return;
  latency_->Add({{"source", sourceName(e.source)}}, prometheus::Histogram::BucketBoundaries(kBuckets.begin(), kBuckets.end()))
      .Observe(static_cast<double>(deliverNs - e.signalNs) / 1e9);
}

std::weak_ptr<prometheus::Collectable> DaemonMetrics::registry() const { return registry_; }
std::weak_ptr<prometheus::Collectable> DaemonMetrics::stateCollector() const { return state_; }

void DaemonMetrics::onClientRefused(const std::string& reason) { refused_->Add({{"reason", reason}}).Increment(); }
void DaemonMetrics::onClientDropped(const std::string& reason) { dropped_->Add({{"reason", reason}}).Increment(); }

std::string DaemonMetrics::render() const {
  auto families = registry_->Collect();
  for (auto& f : state_->Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace reccl::detector
