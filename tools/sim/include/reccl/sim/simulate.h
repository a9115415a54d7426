// The experiment: for each cluster size and seed, one fault sequence replayed by every policy and
// by two references (no faults at all; no link faults), so each policy's losses are counted
// against the same job. Results per policy are means with 95 % confidence intervals over seeds.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reccl/sim/fault_sequence.h"
#include "reccl/sim/replay.h"
#include "reccl/sim/scenario.h"

namespace reccl::sim {

// Mean and the half-width of its two-sided 95 % Student t interval (empty for fewer than 2).
struct Interval {
  double mean = 0;
  std::optional<double> half;
  int n = 0;
  nlohmann::json toJson() const;
};
Interval meanCi95(const std::vector<double>& v);

struct PolicyOutcome {
  std::string name;
  // Per seed. days mode: ratio = work / fault-free work; work mode: fault-free wall / wall.
  std::vector<double> ratio, gpuHoursLost, gpuHoursLostToLinkFaults, wallS;
  std::vector<RunStats> runs;
};

struct SizeOutcome {
  int64_t gpus = 0;
  std::vector<PolicyOutcome> policies;
  std::vector<RunStats> faultFree, noLinkFaults;  // per seed
  // Per seed, faults in the sequence before the run's end, by kind (down, flap, gray, crash).
  std::vector<std::array<int64_t, 4>> faultCounts;
  double elapsedS = 0;  // this machine's time for all of this size's runs
};

struct SimOptions {
  std::vector<int64_t> gpuSizes;  // empty: the scenario's own
  uint64_t seed = 1;
  int seeds = 1;
  std::vector<std::string> policies;             // empty: all of the scenario's
  const std::vector<FaultEvent>* trace = nullptr;  // replayed instead of drawn faults
  std::function<void(size_t done, size_t total)> progress;
};

Result<std::vector<SizeOutcome>> simulate(const Scenario& s, const SimOptions& o);

}  // namespace reccl::sim
