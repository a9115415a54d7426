#include "library_defaults.h"

#include <cstdlib>
#include <string>

#include "reccl/common/params.h"

namespace reccl::sim {

int64_t libraryDefault(std::string_view env) {
  for (const auto& p : params::table())
    if (env == p.env) return std::strtoll(p.def, nullptr, 10);
  return -1;
}

detector::StateMachineParams libraryLinkState() {
  auto ns = [](const char* var) { return uint64_t(libraryDefault(var)) * 1'000'000ull; };
  detector::StateMachineParams p;
  p.holdDownNs = ns("RECCL_HOLDDOWN_MS");
  p.degradedClearNs = ns("RECCL_DEGRADED_CLEAR_MS");
  p.damping.penaltyPerFlap = double(libraryDefault("RECCL_DAMPING_PENALTY"));
  p.damping.suppressThreshold = double(libraryDefault("RECCL_DAMPING_SUPPRESS"));
  p.damping.reuseThreshold = double(libraryDefault("RECCL_DAMPING_REUSE"));
  p.damping.halfLifeNs = ns("RECCL_DAMPING_HALFLIFE_MS");
  return p;
}

}  // namespace reccl::sim
