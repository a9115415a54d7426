// Failover::DetectorLink: the in-process link detector as the monitor holds it (monitor.cpp
// drives it; fault_sources.cpp starts it as a fallback and hands it over).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "failover/failover.h"

#ifdef RECCL_HAVE_DETECTOR
#include "reccl/detector/detector.h"

namespace reccl::failover {
struct Failover::DetectorLink {
  std::unique_ptr<detector::Detector> det;
  std::map<std::string, int> railOf;  // ifname -> rail
};
}  // namespace reccl::failover
#else
namespace reccl::failover {
struct Failover::DetectorLink {};
}  // namespace reccl::failover
#endif
