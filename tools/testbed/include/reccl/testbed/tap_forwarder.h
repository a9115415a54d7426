// Tap mode: each host rail NIC is a tap (carrier driven by TUNSETCARRIER, like a physical NIC)
// and each switch port is a tap enslaved to the rail bridge. One forwarder process per testbed
// is the cable between the two taps of every pair: it copies frames (epoll, non-blocking queues;
// a host NIC's priority queue before its bulk queue, tap_prio_steer.h) and plays the PHY,
// watching both namespaces over rtnetlink and the host NIC's carrier counts (carrier_counters.h,
// read at most every kCarrierCutNs, and only while frames flow):
//   - switch port admin down/up  -> host NIC carrier off/on (TUNSETCARRIER on its queue),
//   - host NIC admin down/up or carrier off/on (e.g. `reccl inject carrier-off`)
//                                -> switch port carrier off/on,
//   - while the host NIC has no carrier no frame crosses in either direction, from at most
//     kCarrierCutNs after the driver dropped it, not from link-watch's later report.
// It holds one queue of every tap; anyone may attach a further queue to flip a carrier. It runs
// inside the fabric namespace, so removing the testbed's processes removes it too.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::testbed {

// How long after the driver drops a host NIC's carrier a frame may still cross: the forwarder
// reads the carrier counts at most this often while frames flow (one pread per interval and busy
// pair), far below the millisecond stalls the benchmarks measure.
inline constexpr uint64_t kCarrierCutNs = 200'000;

struct TapPair {
  UniqueFd host;          // queue 0 of the host NIC tap (bulk)
  UniqueFd hostPriority;  // its queue 1, served first (tap_prio_steer.h)
  UniqueFd fabric;        // queue of the switch port tap
  std::string hostNetns;
  std::string hostDev;    // rail<k>
  std::string fabricDev;  // h<i>r<k>
};

struct ForwarderHandle {
  pid_t pid = 0;
  uint64_t startTicks = 0;
};

// Forks a detached forwarder that owns the queues (the parent's copies are closed), at SCHED_FIFO
// `fifoPrio` (0: normal scheduling; a refusal stops it and names the reason). The forwarder
// exits on SIGTERM or when its taps are deleted.
Result<ForwarderHandle> startForwarder(std::vector<TapPair> pairs, const std::string& fabricNetns, int fifoPrio);
// SIGTERM, then SIGKILL after 2 s; does nothing when pid no longer is that forwarder.
Status stopForwarder(pid_t pid, uint64_t startTicks);
// /proc/<pid>/stat starttime, 0 when the process does not exist.
uint64_t processStartTicks(pid_t pid);

}  // namespace reccl::testbed
