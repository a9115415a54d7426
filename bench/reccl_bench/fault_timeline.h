// What `reccl-bench --fault-plan` makes of a run: per-iteration samples of the allreduce loop and
// the plan's fault/recovery moments in, per-fault stall and bus bandwidth before / during /
// degraded / after out. Pure (no network, no clock), so it is unit tested on made-up timelines.
//
// All times are CLOCK_MONOTONIC ns. A fault's stall is fault syscall start -> the moment the work
// it held up moved again (the library's lastFaultMoveResumeNs, the latest over all ranks and
// connections moved away from a fault before the next fault): a connection with steps outstanding
// counts its first step over the new path, an idle one the start of that path. Its first step is
// also reported (fault -> the first step completed on a path moved to, lastFaultMoveFirstStepNs):
// for a fault that leaves its connections idle (between two calls, or after their share of a call
// was done) that waits for the application's next call and its result checks. Fail-backs do not
// move these stamps, so a call that spans the fault, the failover and the fail-back still shows
// the failover's.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace reccl::bench {

struct IterationSample {
  int64_t startNs = 0;  // the allreduce call's start and return on rank 0
  int64_t endNs = 0;
  double busBw = 0;  // GB/s of this call alone
  // When the counters below had been read on every rank (rank 0's return from the small
  // allreduce that agrees on them): a fault before this moment may already show in them.
  int64_t statsNs = 0;
  // Library counters after the call, maximum over ranks (recclCommGetStats); the stamps are the
  // latest over ranks, on rank 0's clock (stampAsAge).
  uint64_t firstStepNs = 0;  // lastFaultMoveFirstStepNs
  uint64_t resumeNs = 0;     // lastFaultMoveResumeNs
  uint64_t signalNs = 0;     // lastFailoverSignalNs
  uint64_t failovers = 0;
  uint64_t failbacks = 0;
  // lastFailoverSignalNs + lastFailoverUs of each rank, the latest over ranks: when the latest
  // initiated failover committed. (The maximum of lastFailoverUs itself would pair one rank's
  // old duration with another's new signal.)
  uint64_t commitNs = 0;
};

struct FaultMoment {
  int64_t faultNs = 0;     // the fault action's syscall start (a lab cable: its carrier change)
  int64_t recoverNs = -1;  // its undo (or the next up action on the same target); -1: none
  std::string action;      // "link-down", ...
  std::string target;      // "tb-h0/rail0 (switch)"
};

// {"faults": [...], "summary": {...}}; see docs/benchmarks.md for the fields.
nlohmann::json analyzeFaults(const std::vector<IterationSample>& samples, const std::vector<FaultMoment>& faults,
                             int64_t t0Ns);

// The library's stamps are each rank's CLOCK_MONOTONIC, which differs between hosts (each counts
// from its own boot). They cross the ranks as ages instead: stampAsAge(stamp, now) on each rank
// (now read right after the iteration, so the ranks read it at most a call apart), a maximum over
// ranks (recclMax, as the counters) picks the youngest, i.e. the latest stamp, and
// stampFromAge(agreed, now) puts it on the reading rank's clock. 0 (no stamp) stays 0.
uint64_t stampAsAge(uint64_t stampNs, uint64_t nowNs);
uint64_t stampFromAge(uint64_t agreed, uint64_t nowNs);

// Nearest-rank percentile (p in [0,1]) of an unsorted sample; 0 for an empty one.
double percentile(std::vector<double> v, double p);

}  // namespace reccl::bench
