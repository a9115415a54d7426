// The daemon's Prometheus metrics, kept with prometheus-cpp. Counters that move with signals and
// events live in a registry (updated from the detector thread and the daemon loop); what follows
// the detector's state (links, sources, clients, drops) is read at scrape time by a collector,
// so a scrape always shows the state of that moment. Label names follow node_exporter
// (`device`); states are labels (`state="down"` 1, the others 0). Every metric has HELP.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "reccl/detector/detector.h"

namespace reccl::detector {

class DaemonMetrics {
 public:
  // Called at scrape time, on the HTTP server's thread: must be thread-safe.
  using StatusFn = std::function<DetectorStatus()>;
  explicit DaemonMetrics(StatusFn status);

  void onSignal(const LinkSignal& s);
  void onEvent(const LinkEvent& e, uint64_t deliverNs);
  void setClients(int n) { clients_.store(n, std::memory_order_relaxed); }
  // A connection refused at accept (reason: "per_uid", "total") or a client dropped.
  void onClientRefused(const std::string& reason);
  void onClientDropped(const std::string& reason);

  // What the HTTP server exposes.
  std::weak_ptr<prometheus::Collectable> registry() const;
  std::weak_ptr<prometheus::Collectable> stateCollector() const;
  // The text exposition of both, as a scrape would return it (without the server's own metrics).
  std::string render() const;

  // Upper bounds of the detection-latency histogram, seconds.
  static constexpr std::array<double, 12> kBuckets = {10e-6, 25e-6, 50e-6, 100e-6, 200e-6, 500e-6,
                                                      1e-3,  2e-3,  5e-3,  10e-3,  100e-3, 1.0};

 private:
  class StateCollector;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<StateCollector> state_;
  prometheus::Family<prometheus::Counter>* signals_;
  prometheus::Family<prometheus::Counter>* events_;
  prometheus::Family<prometheus::Counter>* refused_;
  prometheus::Family<prometheus::Counter>* dropped_;
  prometheus::Family<prometheus::Histogram>* latency_;
  std::atomic<int> clients_{0};
};

}  // namespace reccl::detector
