// reccl's own defaults, read from the one table of RECCL_* variables (params.def), so the
// simulated reccl holds down and damps links exactly as the library does out of the box.
#pragma once

#include <cstdint>
#include <string_view>

#include "reccl/detector/link_state_machine.h"

namespace reccl::sim {

// The default of an integer RECCL_* variable (e.g. "RECCL_HOLDDOWN_MS"); -1 when there is none.
int64_t libraryDefault(std::string_view env);

// Hold-down, degraded-clear and flap damping as the detector starts with them.
detector::StateMachineParams libraryLinkState();

}  // namespace reccl::sim
