// The tap NICs' priority queues (bpf/tap_prio_steer.bpf.c): a host NIC tap has two transmit
// queues that the forwarder holds, queue 1 for frames at socket priority TC_PRIO_INTERACTIVE (6)
// or above, served first, queue 0 for the rest. This is what a physical NIC with a
// strict-priority traffic class (mqprio) or pfifo_fast's first band gives a host's priority
// traffic; a tap's single FIFO ring cannot.
#pragma once

#include <vector>

#include "reccl/common/status.h"

namespace reccl::testbed {

// A host NIC tap's transmit queues, in the order the forwarder attaches them.
inline constexpr int kTapBulkQueue = 0;
inline constexpr int kTapPriorityQueue = 1;

// Loads the steering program once and attaches it (TUNSETSTEERINGEBPF) to the tap of each queue
// in `queueFds`; the taps keep it, no pin or fd outlives the call. Needs CAP_BPF and
// CAP_NET_ADMIN, as the testbed does.
Status steerTapsByPriority(const std::vector<int>& queueFds);

}  // namespace reccl::testbed
