// What reccl-sim prints: the table (one block per cluster size, and for a sweep the GPU-hours
// lost to link faults per size and policy), the --json document, and the gnuplot figure.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reccl/common/status.h"
#include "reccl/sim/simulate.h"

namespace reccl::sim {

struct RunDescription {
  uint64_t seed = 1;
  int seeds = 1;
  std::string tracePath;  // empty: faults drawn from the scenario's rates
  std::string costsPath;  // empty: built-in reccl costs
};

std::string formatTable(const Scenario& s, const RunDescription& d, const std::vector<SizeOutcome>& r);

// {"tool": "reccl-sim", "scenario": {...}, "results": [{"gpus", "policies": [{"name",
// "effective_time_ratio", "gpu_hours_lost", "gpu_hours_lost_to_link_faults", ...}]}], and for one
// size the same "policies" at the top}.
nlohmann::json resultsToJson(const Scenario& s, const RunDescription& d, const std::vector<SizeOutcome>& r);

// GPU-hours lost to link faults (log) vs GPUs (log), one line per policy with its 95 % interval,
// rendered by gnuplot into `pngPath`. kUnsupported when gnuplot is not installed.
Status plotLossVsSize(const std::vector<SizeOutcome>& r, const std::string& title, const std::string& pngPath);

}  // namespace reccl::sim
