// RECCL_TRANSPORT: which transport carries a communicator's traffic between hosts. Pure functions:
// each rank reports at bootstrap whether every one of its rails has an ACTIVE RDMA port
// (railReadiness), and every rank decides alike from the table of all reports (decideTransport).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reccl/common/status.h"
#include "transport/verbs/rail_map.h"

namespace reccl::transport::verbs {

enum class TransportMode { kAuto, kVerbs, kSocket };
const char* transportModeName(TransportMode m) noexcept;
// "auto", "verbs" or "socket" (case-insensitive); anything else is an error naming RECCL_TRANSPORT.
Result<TransportMode> parseTransportMode(std::string_view text);

// One rank's RDMA on its rails.
struct RankRdma {
  int rank = -1;
  bool ready = false;  // every rail has an ACTIVE RDMA port with a usable GID
  std::string reason;  // when not ready: the first rail that lacks it, and why
};

// This rank's report: each rail mapped (mapRail) and its port ACTIVE.
RankRdma railReadiness(int rank, const RdmaInventory& inv, std::span<const RailNic> rails, int forcedGidIndex = -1);

struct TransportDecision {
  bool verbs = false;
  std::string why;  // one line for the INFO log
};
// auto: verbs when every rank is ready, else sockets (why names the first rank that is not);
// verbs: kUnsupported naming that rank when one is not ready; socket: sockets.
Result<TransportDecision> decideTransport(TransportMode mode, std::span<const RankRdma> ranks);

}  // namespace reccl::transport::verbs
