// Prometheus text exposition of the daemon's counters. Filled from the detector thread
// (signals) and the daemon loop (events); rendered on GET /metrics.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "reccl/detector/detector.h"

namespace reccl::detector {

class DaemonMetrics {
 public:
  void onSignal(const LinkSignal& s, uint64_t recvNs);
  void onEvent(const LinkEvent& e, uint64_t deliverNs);
  std::string render(const DetectorStatus& st, int clients) const;

  // Upper bounds of the detection-latency histogram, seconds.
  static constexpr std::array<double, 12> kBuckets = {10e-6, 25e-6, 50e-6, 100e-6, 200e-6, 500e-6,
                                                      1e-3,  2e-3,  5e-3,  10e-3,  100e-3, 1.0};

 private:
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> buckets{};
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> signals_;  // (kind, source)
  std::map<std::pair<std::string, std::string>, uint64_t> events_;   // (type, source)
  std::map<std::string, Histogram> latency_;                         // by source
};

}  // namespace reccl::detector
