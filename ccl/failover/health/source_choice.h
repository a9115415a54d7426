// Which fault sources a communicator's monitor tries, in order, for a RECCL_DETECTOR value.
// Pure: the monitor (fault_sources.cpp) walks the order; tests check it without a network.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "reccl/common/status.h"

namespace reccl::failover {

enum class SourceKind : uint8_t {
  kDaemon,     // the node daemon reccl-detectord over its unix socket
  kInProcess,  // the link detector in this process (BPF where it loads, else rtnetlink)
  kPoll,       // SIOCGIFFLAGS of each rail NIC every RECCL_FAILOVER_POLL_MS
  kNone,       // in-band only (socket errors, stall check): always on besides the others
};
const char* sourceKindName(SourceKind k) noexcept;

struct SourcePlan {
  // Tried in this order; the first that starts is active, the ones after it are the fallbacks
  // when it is lost. Ends in kPoll or kNone, which always start.
  std::vector<SourceKind> order;
  std::string inProcessMode;  // the in-process detector's mode: auto, bpf or netlink
  // Keep trying the daemon (every reconnect period) while it is not, or no longer, there.
  bool retryDaemon = false;
};

// auto: daemon, in-process (auto), poll; daemon: daemon, poll (never BPF in the job: that is
// what the daemon is for); bpf / netlink: in-process in that mode, poll; poll; none. Without a
// real NIC (loopback only) nothing but in-band. Anything else is refused, naming the variable.
Result<SourcePlan> planSources(std::string_view detectorEnv, bool realNics);

}  // namespace reccl::failover
