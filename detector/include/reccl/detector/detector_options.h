// What a Detector watches and how: parsed from CLI flags, daemon requests and RECCL_* variables.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/detector/bpf_source.h"
#include "reccl/detector/link_state_machine.h"
#include "reccl/detector/rdma_loss.h"

namespace reccl::detector {

// auto: BPF where it loads, else rtnetlink alone (with a warning); bpf: BPF required;
// netlink: no BPF at all (the unprivileged fallback, also forced by tests).
enum class SourceMode { kAuto, kBpf, kNetlink };

Result<SourceMode> parseSourceMode(std::string_view text);
const char* sourceModeName(SourceMode m) noexcept;

// A device in a namespace: netns "" = own, a name under /run/netns, or an nsfs path.
struct WatchSpec {
  std::string netns;
  std::string ifname;
};

// "IF" or "NETNS:IF" (split at the last ':').
Result<WatchSpec> parseWatchSpec(std::string_view text);

struct DetectorOptions {
  SourceMode mode = SourceMode::kAuto;
  bool rtnetlink = true;  // the rtnetlink listener (link-up source; sole source in netlink mode)
  bool rdma = true;       // RDMA async events where verbs devices exist
  // Gray failures of RDMA ports from their sequence-error counters (rdma_loss.h), read under
  // rdmaSysfs; rdmaLoss.windowNs 0: off.
  RdmaLossParams rdmaLoss;
  std::string rdmaSysfs = kInfinibandSysfs;
  BpfOptions bpf;
  StateMachineParams stateMachine;
  std::vector<WatchSpec> watch;
  size_t queueLimit = 65536;  // subscriber queue; overflow is counted, never silent
  // SCHED_FIFO priority of the detector's own thread (start(); a caller that drives it with
  // startOnCaller() schedules itself) (0: normal scheduling). On a loaded host the
  // wake-up after a kernel event otherwise waits for a CPU for milliseconds. Needs
  // CAP_SYS_NICE; without it the thread stays at normal priority (logged).
  int realtimePriority = 0;

  // Defaults from RECCL_DETECTOR, RECCL_HOLDDOWN_MS, RECCL_DAMPING_*, RECCL_RETRANS_*, RECCL_RDMA_LOSS_*.
  static DetectorOptions fromEnv();
  Status validate() const;
};

}  // namespace reccl::detector
