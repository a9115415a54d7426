// A child communicator's rendezvous handed from one rank of the parent to the others without a
// collective over the parent: recclCommShrink's way (the excluded ranks may be dead), and
// recclCommSplit's on a revoked parent (whose connections a revoke failed). The leader, the
// lowest member, starts a rendezvous (recclGetUniqueId's kind of root) and sends its id to each
// other member over a connection of its own to that member's data listener (core/comm_shrink.cpp);
// the others take it from their listener.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "api/comm_handle.h"
#include "core/comm.h"
#include "core/wire.h"
#include "reccl/reccl.h"

namespace reccl::api {

struct Handover {
  std::vector<int> members;  // the parent's ranks that join the child, ascending; the first leads
  // What every member must have agreed to (core::Comm::shrinkDigest of the excluded ranks); the
  // note carries it and its serial, so members that disagree fail instead of forming two groups.
  std::array<std::byte, core::kShrinkDigestBytes> digest{};
  uint32_t serial = 0;
  std::string call;      // the API call, first word of every message: "recclCommShrink"
  std::string mismatch;  // why a member's note differs: "the ranks passed different exclude lists"
};

// The child's rendezvous for this rank of the parent (comm, whose core communicator is parent):
// started and handed over by the leader, taken from the leader's note by the others. Waits up to
// cfg's bootstrap timeout (else the parent's), and ends at once when comm is aborted or
// `alsoCancel` (the child's abort, on a non-blocking init's thread) is set; a destroy of comm
// waits for it, as for any call inside. The caller holds comm (a CallTicket) throughout.
Result<core::UniqueIdData> handOver(recclComm_t comm, core::Comm& parent, const Handover& h, const CommConfig& cfg,
                                    const std::atomic<bool>* alsoCancel = nullptr);

}  // namespace reccl::api
