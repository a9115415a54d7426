// Scheduling of the threads failover starts. RECCL_FAILOVER_RT_PRIO puts the control threads
// (monitor, migrators, standby watcher) at SCHED_FIFO; a thread one of them starts inherits that
// policy, so the threads that must not run at a real-time priority drop back to normal scheduling
// first thing: the in-process detector's loader (100s of ms of BPF verification, and the detector
// thread it starts) and the relay paths (they move data, and would starve the application).
#pragma once

#include "reccl/common/status.h"

namespace reccl::failover {

// The calling thread to SCHED_FIFO `prio` (1-99); the error names why it was refused (EPERM
// without CAP_SYS_NICE or an RLIMIT_RTPRIO that allows it).
Status raiseToFifo(int prio);

// The calling thread back to SCHED_OTHER (nice 0 kept) when it runs at a real-time policy;
// nothing otherwise. Lowering needs no privilege.
void dropToNormalScheduling() noexcept;

}  // namespace reccl::failover
