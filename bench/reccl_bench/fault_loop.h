// `reccl-bench --fault-plan FILE`: allreduce of one size in a loop while rank 0 runs a reccl
// inject plan (the inject library, on a thread of its own, started when the timed loop starts);
// with --fault-plan-every-rank every rank runs its own (the file at that path on its host).
// Every result is checked bit for bit; per iteration rank 0 records the call's start and end
// (CLOCK_MONOTONIC), its bus bandwidth and the library's failover counters and stamps (the latest
// over ranks, the stamps on rank 0's clock: stampAsAge), agreed by a small allreduce after each
// iteration that also carries rank 0's stop decision and whether any rank's plan still runs.
// At the end the plan's action records (fault syscall start times) and the timeline give each
// fault's stall and the bus bandwidth before / during / degraded / after (fault_timeline.h).
#pragma once

#include "bench_options.h"
#include "reccl/inject/fault_plan.h"
#include "reccl/reccl.h"

namespace reccl::bench {

// Runs the loop on this rank; rank 0 also runs the plan (every rank with
// --fault-plan-every-rank, each printing a line on its own), prints the report and writes --json.
// Returns the process exit code (0 ok, 1 a failed call, wrong element or failed fault action).
int runFaultPlanRank(const BenchOptions& o, const inject::FaultPlan& plan, recclComm_t comm, int rank, int nranks);

}  // namespace reccl::bench
