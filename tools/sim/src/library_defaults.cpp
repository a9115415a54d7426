#include "library_defaults.h"

#include <cstdlib>
#include <string>

namespace reccl::sim {

int64_t libraryDefault(std::string_view env) {
#define X(kind, name, var, def, allowed, help) \
  if (env == var) return std::strtoll(def, nullptr, 10);
#include "reccl/common/params.def"
#undef X
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
