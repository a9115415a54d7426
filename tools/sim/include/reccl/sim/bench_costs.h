// reccl's failover costs as a `reccl-bench --fault-plan ... --json` run measured them. The file is
// read as the bench writes it (docs/benchmarks.md); these keys are used, and a file without one
// of them is refused with the key's name:
//   tool = "reccl-bench", mode = "fault-plan"     which file this is
//   faults[].failover, faults[].stall_ms           the stall of every fault that failed over
//                                                  (fault -> traffic moving again), as a sample
//   summary.signal_after_fault_ms.p50              detection (negative, for the in-band source,
//                                                  which dates its signal to the last ACK: 0)
//   summary.ratios.degraded_over_before            bandwidth kept after failover (capped at 1:
//                                                  a failover cannot make the loop faster)
// and where present (a run whose links came back):
//   faults[].recover_at_s, faults[].failed_back_at_s   recovery -> traffic back on the link, less
//   environment.env.RECCL_HOLDDOWN_MS                  the run's hold-down (default: the library's),
//                                                      as a sample of the fail-back's own delay
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "reccl/common/status.h"
#include "reccl/sim/dist.h"
#include "reccl/sim/scenario.h"

namespace reccl::sim {

struct BenchCosts {
  Dist stallS;  // empirical, seconds
  Dist failBackDelayS = Dist::constant(0);
  int failBacks = 0;  // faults with a measured fail-back
  double detectS = 0;
  double bwAfter = 1;
  int faults = 0;
  int faultsWithFailover = 0;
};

Result<BenchCosts> readBenchCosts(const nlohmann::json& j);

// Sets detect_s, stall_s, fail_back_stall_s (the same sample: a fail-back is the same migration),
// fail_back_delay_s and bw_after of the policies named reccl and reccl-no-failback.
void applyBenchCosts(Scenario& s, const BenchCosts& c);

}  // namespace reccl::sim
