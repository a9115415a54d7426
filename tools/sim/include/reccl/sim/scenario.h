// What reccl-sim simulates: a data-parallel job spanning a rail-optimised cluster (every host's
// NIC k on rail switch k), the faults of its last-hop links, and the policies that answer them.
// Every field has a default (defaultScenario(); sources in docs/simulation.md); a JSON scenario
// file overrides any of them, and unknown keys are errors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reccl/common/status.h"
#include "reccl/detector/link_state_machine.h"
#include "reccl/sim/dist.h"

namespace reccl::sim {

struct ClusterShape {
  int64_t gpus = 32768;
  int gpusPerHost = 8;
  int nicsPerHost = 8;  // = rails
  // NICs fused into virtual NICs of `fusedPorts` ports (NCCL's port failover works only inside
  // one): a scenario switch, off by default.
  bool fusedNics = false;
  int fusedPorts = 2;

  int64_t hosts() const { return (gpus + gpusPerHost - 1) / gpusPerHost; }
  int64_t links() const { return hosts() * nicsPerHost; }
};

struct JobShape {
  double days = 365;  // simulated span (wall clock) when workS is 0
  double workS = 0;   // > 0: run until this much fault-free work is done and report the wall time
  double commShare = 0.2;  // share of an iteration spent in communication that nothing hides
  double checkpointIntervalS = 900;  // wall time from one checkpoint's end to the next
  double checkpointCostS = 10;       // wall time a checkpoint stops the job
  double restartS = 480;             // abort -> training again (reschedule, spare host, load checkpoint)
};

struct FaultModel {
  double linkFaultsPerLinkDay = 0;  // hard faults: the link is down until repaired
  Dist repairS;
  double flapsPerLinkDay = 0;  // flap episodes: `count` short downs, `gap` up between them
  Dist flapCount, flapDownS, flapGapS;
  double grayPerLinkDay = 0;  // gray episodes: the link is up but loses packets
  Dist grayDurationS;
  double grayBandwidth = 0.5;  // fraction of bandwidth a gray link keeps for a policy that does not see it
  double otherFailuresPerGpuDay = 0;  // every other interruption (GPU, host, software): abort + restart
};

enum class Scope { kHost, kFused };

struct PolicyParams {
  std::string name;
  std::string base;  // the policy a scenario's own started from (empty: built in)
  std::string summary;
  bool failover = false;      // false: a down that outlasts detection aborts the job
  Scope scope = Scope::kHost;  // kFused: moves traffic only inside a fused virtual NIC
  double detectS = 0;         // link down -> the policy acts
  double retryS = 0;          // a down shorter than detectS stalls to the next transport retry (0: to link up)
  Dist stallS;                // link down -> traffic moving again after a failover (includes detectS)
  // Fraction of fault-free bandwidth kept with one NIC of the group out of use; k out of use keep
  // bwAfter * (G - k) / (G - 1). Negative: rebalanced over the survivors, (G - 1) / G.
  double bwAfter = -1;
  bool failBack = false;
  detector::StateMachineParams linkState;  // hold-down and flap damping before a fail-back
  Dist failBackStallS;
  // The link declared up (hold-down and damping passed) -> traffic moving back onto it: the new
  // connection's setup. A fault in between finds the link still out of use.
  Dist failBackDelayS = Dist::constant(0);
  std::optional<double> grayDetectS;  // empty: gray loss is not seen
  double grayClearS = 5;              // no loss this long -> the gray link is used again
};

struct Scenario {
  ClusterShape cluster;
  JobShape job;
  FaultModel faults;
  std::vector<PolicyParams> policies;
};

// The built-in scenario: 32,768 GPUs for 365 days, Llama 3's interruption rates, the six policies
// (fail-stop, completion-timer, vccl, r2ccl, reccl, reccl-no-failback).
Scenario defaultScenario();

// Overlays a scenario file's object onto `base`. Errors name the field ("job.restart_s: ...").
Result<Scenario> applyScenarioJson(const nlohmann::json& j, Scenario base);
// Whole-scenario checks (shapes that fit, rates, a policy list without duplicates).
Status validateScenario(const Scenario& s);
// The effective scenario, in the form applyScenarioJson reads.
nlohmann::json scenarioToJson(const Scenario& s);

// bwAfter with its default resolved for the cluster: the group is the host's NICs or a fused port
// group.
double groupSize(const PolicyParams& p, const ClusterShape& c);
double resolvedBwAfter(const PolicyParams& p, const ClusterShape& c);

const PolicyParams* findPolicy(const Scenario& s, const std::string& name);

}  // namespace reccl::sim
