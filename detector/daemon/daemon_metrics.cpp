#include "daemon_metrics.h"

#include <cinttypes>
#include <cstdio>

namespace reccl::detector {

void DaemonMetrics::onSignal(const LinkSignal& s, uint64_t) {
  std::lock_guard lk(mu_);
  signals_[{kindName(s.kind), sourceName(s.source)}]++;
}

void DaemonMetrics::onEvent(const LinkEvent& e, uint64_t deliverNs) {
  std::lock_guard lk(mu_);
  events_[{linkEventTypeName(e.type), sourceName(e.source)}]++;
  // Detection latency: from the first signal's kernel timestamp to delivery to clients. Only
  // for LinkDown and LinkDegraded: LinkUp includes the deliberate hold-down.
  if (e.type == LinkEventType::kLinkUp || !e.signalNs || deliverNs < e.signalNs) return;
  double sec = static_cast<double>(deliverNs - e.signalNs) / 1e9;
  auto& h = latency_[sourceName(e.source)];
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (sec <= kBuckets[i]) h.buckets[i]++;
  h.count++;
  h.sum += sec;
}

namespace {
std::string esc(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\' || c == '"') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}
}  // namespace

std::string DaemonMetrics::render(const DetectorStatus& st, int clients) const {
  std::string out;
  char line[512];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof(line), fmt, args...);
    out += line;
  };
  std::lock_guard lk(mu_);
  out += "# HELP reccl_detector_signals_total Signals from each source before debouncing.\n";
  out += "# TYPE reccl_detector_signals_total counter\n";
  for (const auto& [k, v] : signals_)
    add("reccl_detector_signals_total{kind=\"%s\",source=\"%s\"} %" PRIu64 "\n", k.first.c_str(), k.second.c_str(), v);
  out += "# HELP reccl_detector_events_total Link events delivered to clients, by type and first source.\n";
  out += "# TYPE reccl_detector_events_total counter\n";
  for (const auto& [k, v] : events_)
    add("reccl_detector_events_total{type=\"%s\",source=\"%s\"} %" PRIu64 "\n", k.first.c_str(), k.second.c_str(), v);
  out += "# HELP reccl_detector_detection_latency_seconds First kernel signal to delivery (down and degraded).\n";
  out += "# TYPE reccl_detector_detection_latency_seconds histogram\n";
  for (const auto& [src, h] : latency_) {
    for (size_t i = 0; i < kBuckets.size(); ++i)
      add("reccl_detector_detection_latency_seconds_bucket{source=\"%s\",le=\"%g\"} %" PRIu64 "\n", src.c_str(), kBuckets[i], h.buckets[i]);
    add("reccl_detector_detection_latency_seconds_bucket{source=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", src.c_str(), h.count);
    add("reccl_detector_detection_latency_seconds_sum{source=\"%s\"} %.9f\n", src.c_str(), h.sum);
    add("reccl_detector_detection_latency_seconds_count{source=\"%s\"} %" PRIu64 "\n", src.c_str(), h.count);
  }
  out += "# HELP reccl_detector_carrier_losses_total Carrier losses per watched device (kernel count, coalesced flaps included).\n";
  out += "# TYPE reccl_detector_carrier_losses_total counter\n";
  for (const auto& l : st.links)
    add("reccl_detector_carrier_losses_total{netns=\"%s\",dev=\"%s\"} %" PRIu64 "\n", esc(l.watch.netns).c_str(), esc(l.watch.ifname).c_str(), l.status.flaps);
  out += "# HELP reccl_detector_link_state Declared link state: 0 up, 1 down, 2 degraded.\n";
  out += "# TYPE reccl_detector_link_state gauge\n";
  for (const auto& l : st.links)
    add("reccl_detector_link_state{netns=\"%s\",dev=\"%s\"} %d\n", esc(l.watch.netns).c_str(), esc(l.watch.ifname).c_str(), static_cast<int>(l.status.state));
  out += "# HELP reccl_detector_link_penalty Flap-damping penalty now.\n";
  out += "# TYPE reccl_detector_link_penalty gauge\n";
  for (const auto& l : st.links)
    add("reccl_detector_link_penalty{netns=\"%s\",dev=\"%s\"} %.1f\n", esc(l.watch.netns).c_str(), esc(l.watch.ifname).c_str(), l.status.penalty);
  out += "# HELP reccl_detector_ringbuf_drops_total Records lost because the BPF ring buffer was full.\n";
  out += "# TYPE reccl_detector_ringbuf_drops_total counter\n";
  add("reccl_detector_ringbuf_drops_total %" PRIu64 "\n", st.counters.bpf.ringbufDrops);
  out += "# TYPE reccl_detector_ringbuf_records_total counter\n";
  add("reccl_detector_ringbuf_records_total %" PRIu64 "\n", st.counters.bpf.events);
  out += "# HELP reccl_detector_scan_runs_total Firings of the BPF timer that re-reads watched devices while the kernel's link-watch work is due.\n";
  out += "# TYPE reccl_detector_scan_runs_total counter\n";
  add("reccl_detector_scan_runs_total %" PRIu64 "\n", st.counters.bpf.scanRuns);
  out += "# TYPE reccl_detector_queue_overflows_total counter\n";
  add("reccl_detector_queue_overflows_total %" PRIu64 "\n", st.counters.queueOverflows);
  out += "# TYPE reccl_detector_rtnetlink_overruns_total counter\n";
  add("reccl_detector_rtnetlink_overruns_total %" PRIu64 "\n", st.counters.rtnlOverruns);
  out += "# HELP reccl_detector_source_active 1 when the source or hook is active on this kernel.\n";
  out += "# TYPE reccl_detector_source_active gauge\n";
  for (const auto& s : st.sources)
    add("reccl_detector_source_active{source=\"%s\"} %d\n", esc(s.name).c_str(), s.active ? 1 : 0);
  out += "# TYPE reccl_detector_clients gauge\n";
  add("reccl_detector_clients %d\n", clients);
  return out;
}

}  // namespace reccl::detector
