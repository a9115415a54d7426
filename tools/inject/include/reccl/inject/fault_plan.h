// A fault plan: a JSON list of timed actions, parsed and validated as a whole before anything
// runs. Parsing is pure (no namespace or device lookups), so it can be fuzzed; target checks
// happen in the runner's prepare step.
//
//   {"version": 1, "actions": [
//     {"at_ms": 0,    "action": "drop", "target": {"netns": "tb-h0", "dev": "rail0"},
//      "duration_ms": 2000, "params": {"rate": 0.01, "direction": "egress",
//                                      "flow": "udp:*:*:10.100.0.2:5000"}},
//     {"at_ms": 500,  "action": "link-down", "target": {"netns": "tb-h1", "dev": "rail1",
//      "side": "switch"}, "duration_ms": 300},
//     {"at_ms": 1000, "action": "flap", "target": {"netns": "tb-h0", "dev": "rail0"},
//      "params": {"period_ms": 100, "count": 5, "jitter_ms": 5}}]}
//
// A bare top-level array of actions is accepted too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/inject/drop_rule.h"
#include "reccl/inject/target.h"

namespace reccl::inject {

enum class ActionKind { kLinkDown, kLinkUp, kCarrierOff, kCarrierOn, kDrop, kBlackhole, kClear };

const char* actionName(ActionKind k) noexcept;  // "link-down", ...
Result<ActionKind> parseActionName(std::string_view text);
// link-down -> link-up, carrier-off -> carrier-on, drop/blackhole -> themselves (rule removal).
bool actionIsUndoable(ActionKind k) noexcept;

struct PlanAction {
  int64_t atMs = 0;
  ActionKind kind = ActionKind::kLinkDown;
  Target target;
  int64_t durationMs = 0;  // > 0: undone automatically at atMs + durationMs
  DropRule drop;           // kDrop / kBlackhole
  int source = 0;          // index of the entry in the plan file it came from
};

struct FaultPlan {
  std::vector<PlanAction> actions;  // in file order (flaps expanded in place)
  int64_t endMs() const noexcept;   // the last scheduled moment, undo times included
};

inline constexpr int64_t kMaxPlanMs = 24LL * 3600 * 1000;
inline constexpr size_t kMaxPlanActions = 10000;
inline constexpr size_t kMaxPlanBytes = 1u << 20;

// Parses and validates; the error names the entry and field: "actions[2].params.rate: ...".
Result<FaultPlan> parsePlan(std::string_view json);
Result<FaultPlan> loadPlanFile(const std::string& path);

// A down/up alternation: cycle i goes down at startMs + i*periodMs (+ jitter) and up downMs
// later (+ jitter). Jitter is uniform in [-jitterMs, +jitterMs] from a seeded generator (so a
// flap is reproducible) and must stay below a quarter of the shorter phase, which keeps every
// transition in order.
struct FlapSpec {
  int64_t periodMs = 0;
  int64_t downMs = 0;  // 0: half the period
  int64_t jitterMs = 0;
  int64_t count = 0;
  uint64_t seed = 1;
  bool carrier = false;  // carrier-off/on (taps, lab cables) instead of link-down/up
};

Status validateFlap(const FlapSpec& spec);
Result<std::vector<PlanAction>> expandFlap(const Target& target, const FlapSpec& spec,
                                           int64_t startMs, int source = 0);

}  // namespace reccl::inject
