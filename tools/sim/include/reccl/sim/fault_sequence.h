// The faults one simulated job meets: drawn from the scenario's rates for a seed, or read from a
// trace file. Every policy of a seed replays the same sequence, including the uniforms that pick
// each policy's own stall quantile (common random numbers).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "reccl/common/status.h"
#include "reccl/sim/dist.h"
#include "reccl/sim/scenario.h"

namespace reccl::sim {

enum class FaultKind { kDown, kFlap, kGray, kCrash };
const char* faultKindName(FaultKind k) noexcept;

struct FaultEvent {
  double atS = 0;
  FaultKind kind = FaultKind::kDown;
  uint32_t host = 0, nic = 0;
  double durationS = 0;  // down: until repaired; flap: each down; gray: the episode
  uint32_t count = 1;    // flap: number of downs
  double gapS = 0;       // flap: up time between two downs
  double u = 0.5;        // quantile of the policy's stall for this fault
  double u2 = 0.5;       // quantile of its fail-back stall
};

class FaultSequence {
 public:
  // No faults at all (the fault-free reference).
  static FaultSequence none() { return FaultSequence(); }
  // Poisson arrivals: per link (hard faults, flap episodes, gray episodes) and per GPU (every
  // other interruption); the link uniformly among hosts x NICs. Drawn as far as asked.
  static FaultSequence drawn(const Scenario& s, uint64_t seed);
  // A trace: sorted by time (stable), u and u2 drawn from `seed`.
  static FaultSequence fixed(std::vector<FaultEvent> events, uint64_t seed);

  // The i-th fault, or nullptr past the last.
  const FaultEvent* at(size_t i);

 private:
  FaultSequence() : rng_(0) {}
  void drawNext();

  std::vector<FaultEvent> events_;
  bool endless_ = false;
  FaultModel model_;
  int64_t hosts_ = 0, gpus_ = 0;
  int nics_ = 0;
  double ratePerS_ = 0;     // all kinds together
  double share_[3] = {};    // cumulative shares of down, flap, gray (the rest: crash)
  double t_ = 0;
  Rng rng_;
};

// {"version": 1, "faults": [{"at_s", "kind": "down"|"flap"|"gray"|"crash", "host", "nic",
// "duration_s" (down, gray), "down_s", "gap_s", "count" (flap)}, ...]}. Errors name the field.
Result<std::vector<FaultEvent>> parseTrace(const nlohmann::json& j, const ClusterShape& c);

}  // namespace reccl::sim
