// Scheduling of the threads failover starts. The control threads (monitor, migrators, standby
// watcher) sit idle until a fault and must then run at once, on CPUs the application keeps busy:
// - RECCL_FAILOVER_SLICE_US (opt-in) has them ask the kernel for a short time slice: on an EEVDF
//   kernel (Linux 6.12+) a waking task with a shorter slice preempts a running one with a longer
//   slice, yet keeps its fair share; no privilege is needed. Older kernels ignore the request.
// - RECCL_FAILOVER_RT_PRIO (opt-in) puts them at SCHED_FIFO instead, where permitted. The
//   in-process detector has no thread: the monitor drives it.
// Neither is on by default; docs/failover.md gives the reasons, docs/results/fault-bench.md the runs.
// A thread one of them starts inherits either, so the threads that must not run at FIFO drop back
// to normal scheduling first thing: the relay paths (they move data, and at FIFO would starve the
// application) and the in-process detector's loader (100s of ms of BPF verification).
#pragma once

#include <atomic>
#include <cstdint>

#include "reccl/common/status.h"

namespace reccl::failover {

// The calling thread to SCHED_FIFO `prio` (1-99); the error names why it was refused (EPERM
// without CAP_SYS_NICE or an RLIMIT_RTPRIO that allows it).
Status raiseToFifo(int prio);

// Asks for a time slice of `ns` (100 us - 100 ms) for the calling thread, keeping its fair policy
// (SCHED_OTHER or SCHED_BATCH) and nice value. kUnsupported when the kernel ignores the request
// (no EEVDF custom slices), kInvalidArgument when the thread is not at a fair policy or `ns` is
// out of range.
Status requestSlice(uint64_t ns);

// The calling thread back to normal scheduling: SCHED_OTHER from a real-time policy, and the
// kernel's default slice at a fair policy (which it keeps). Needs no privilege.
void dropToNormalScheduling() noexcept;

// The policy of one communicator's control threads: enter() names the calling thread and puts it
// at SCHED_FIFO `rtPrio` when set and permitted, else at the short slice `sliceNs` where the
// kernel has them; a refusal is logged once per communicator. Safe from any thread.
class ControlThreads {
 public:
  ControlThreads(int rank, int rtPrio, uint64_t sliceNs) : rank_(rank), rtPrio_(rtPrio), sliceNs_(sliceNs) {}
  // `threadName`: 15 characters at most (top -H, ps -L, perf show it).
  void enter(const char* what, const char* threadName);

 private:
  int rank_;
  int rtPrio_;
  uint64_t sliceNs_;
  std::atomic<bool> rtLogged_{false};
  std::atomic<bool> sliceLogged_{false};
};

}  // namespace reccl::failover
