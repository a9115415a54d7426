// One policy replaying one fault sequence: a discrete-event simulation of the job's progress.
//
// Work is counted in fault-free seconds and grows at a rate set by the slowest host (the job is
// synchronous): 1 / ((1 - c) + c / bw), c the communication share and bw the worst host's share
// of its fault-free bandwidth. Between events the rate is constant, so the simulation jumps from
// event to event (faults, detections, repairs, fail-backs), never iteration by iteration; the
// cost grows with the number of faults, not with cluster size or simulated time.
//
// A stall (detection, migration) stops progress; an abort loses the work since the last
// checkpoint and stops the job for the restart. A checkpoint is due checkpoint_interval_s of wall
// time after the previous one (or the restart) ended and stops the job checkpoint_cost_s; as with
// time-triggered checkpoints, a stall leaves less work in an interval rather than moving the
// checkpoint, so every loss counts once and is never rounded to whole intervals (step-triggered
// checkpoints lose the same on average, with a lumpier spread). Fail-back timing and
// flap damping run through the detector's own LinkStateMachine (hold-down, penalty, reuse).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "reccl/sim/fault_sequence.h"
#include "reccl/sim/scenario.h"

namespace reccl::sim {

// When a run ends: at a wall time (job.days) or once an amount of work is done (job.work_s).
struct Stop {
  double wallS = 0;
  double workS = 0;
  static Stop of(const JobShape& j) { return j.workS > 0 ? Stop{0, j.workS} : Stop{j.days * 86400.0, 0}; }
};

struct RunStats {
  double wallS = 0;  // simulated time at the end
  double workS = 0;  // fault-free seconds of work done
  int64_t linkFaults = 0;      // link faults met (downs, flap downs, gray episodes)
  int64_t ignoredFaults = 0;   // met while the job was restarting (the restart avoids the link)
  int64_t rideThroughs = 0;    // downs shorter than detection, waited out
  int64_t failovers = 0;
  int64_t failbacks = 0;
  int64_t linkAborts = 0;      // aborts caused by a link fault
  int64_t otherAborts = 0;
  double stallS = 0;           // wall time stopped by link faults (detection, migration, ride-through)
  double restartS = 0;         // wall time restarting
  double lostWorkS = 0;        // work thrown away by aborts
  double degradedS = 0;        // wall time running below full speed
  nlohmann::json toJson() const;
};

// `policy` null: link faults cost nothing (the reference a policy's link-fault losses are
// measured against); other interruptions still happen.
RunStats replay(const Scenario& s, const PolicyParams* policy, FaultSequence& faults, Stop stop);

}  // namespace reccl::sim
