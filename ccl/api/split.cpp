// recclCommSplit on top of the parent communicator: the ranks gather every (color, key) over it,
// each color's first rank (by key, then parent rank) starts a rendezvous, the parent gathers
// those unique ids, and each member joins its color's communicator with recclCommInitRank's
// machinery. The ids travel over the parent's connections, which every member already proved it
// belongs to. A revoked parent's connections are failed (NCCL's split after ncclCommRevoke runs
// over its bootstrap ring instead): there the ranks first make a communicator of all the
// parent's ranks through recclCommShrink's handover (api/handover.h), which needs only the
// parent's listeners, and the two exchanges run over it.
#include <sodium.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "algo/collective.h"
#include "api/api_result.h"
#include "api/comm_handle.h"
#include "api/handover.h"
#include "api/launch.h"
#include "core/wire.h"
#include "reccl/common/log.h"
#include "reccl/reccl.h"

using namespace reccl;
using namespace reccl::api;

namespace {

struct Member {
  int32_t color;
  int32_t key;
  int parentRank;
};

// The members of `color` in their new order.
std::vector<Member> membersOf(const std::vector<int32_t>& colorKey, int32_t color) {
  std::vector<Member> out;
  for (size_t r = 0; r < colorKey.size() / 2; ++r)
    if (colorKey[2 * r] == color) out.push_back({color, colorKey[2 * r + 1], static_cast<int>(r)});
  std::stable_sort(out.begin(), out.end(), [](const Member& a, const Member& b) {
    return a.key != b.key ? a.key < b.key : a.parentRank < b.parentRank;
  });
  return out;
}

// The split's two exchanges over `over` (comm itself, or the exchange communicator of a revoked
// comm) and this rank's child: *newcomm. `cfgStatus`: whether this rank's config was good.
recclResult_t splitOver(recclComm& over, int n, int me, int color, int key, const Status& cfgStatus,
                        const CommConfig& cfg, recclComm_t* newcomm, CallTicket& held) {
  // Every rank takes part in both exchanges, so a rank with a bad config tells the others by
  // the color it sends (-2) instead of leaving them waiting.
  std::vector<int32_t> colorKey(2 * static_cast<size_t>(n));
  int32_t mine[2] = {cfgStatus.ok() ? color : -2, key};
  // Both exchanges go where a host call goes (api/launch.h): after work queued on streams.
  const algo::Collective colorKeys{algo::CollKind::kAllGather, mine, colorKey.data(), 2, recclInt32, recclSum, 0, {}, {}};
  RECCL_CHECK(finish(launch(over, colorKeys, nullptr)));
  if (!cfgStatus.ok()) return fail(cfgStatus);
  for (int r = 0; r < n; ++r)
    if (colorKey[2 * static_cast<size_t>(r)] == -2)
      return fail(recclInvalidUsage, "rank " + std::to_string(r) + " of comm passed a bad config to recclCommSplit");

  std::vector<Member> group;
  int newRank = -1;
  if (color != RECCL_SPLIT_NOCOLOR) {
    group = membersOf(colorKey, color);
    for (size_t i = 0; i < group.size(); ++i)
      if (group[i].parentRank == me) newRank = static_cast<int>(i);
  }
  // Each group's first member starts the rendezvous; a failure there is sent as an all-zero
  // id, which every member of that group then reports.
  // Both hold rendezvous secrets: wiped on every way out.
  std::vector<std::byte> ids(static_cast<size_t>(n) * core::kUniqueIdBytes);
  std::vector<std::byte> myId(core::kUniqueIdBytes);
  struct Wipe {
    std::vector<std::byte>& a;
    std::vector<std::byte>& b;
    ~Wipe() {
      sodium_memzero(a.data(), a.size());
      sodium_memzero(b.data(), b.size());
    }
  } wipe{ids, myId};
  Status rootStatus;
  if (newRank == 0) {
    auto id = startDetachedRoot();
    if (id.ok()) {
      core::encodeUniqueId(*id, std::span<std::byte, core::kUniqueIdBytes>(myId.data(), core::kUniqueIdBytes));
      core::wipeKey(id->bootKey);
    } else {
      rootStatus = id.status();
    }
  }
  Status gathered = launch(over,
                           {algo::CollKind::kAllGather, myId.data(), ids.data(), core::kUniqueIdBytes, recclUint8,
                            recclSum, 0, {}, {}},
                           nullptr);
  if (!gathered.ok()) return fail(gathered.Wrap("recclCommSplit: exchanging unique ids"));
  if (color == RECCL_SPLIT_NOCOLOR) return recclSuccess;
  if (!rootStatus.ok()) return fail(rootStatus.Wrap("recclCommSplit: color " + std::to_string(color)));
  std::span<const std::byte> leaderId(ids.data() + static_cast<size_t>(group[0].parentRank) * core::kUniqueIdBytes,
                                      core::kUniqueIdBytes);
  auto id = core::decodeUniqueId(leaderId);
  if (!id.ok())
    return fail(recclInternalError, "recclCommSplit: color " + std::to_string(color) + ": rank " +
                                        std::to_string(group[0].parentRank) + " could not start the rendezvous");
  // The child's init (a blocking one waits for its whole rendezvous) needs nothing of comm: a
  // close of comm meanwhile need not wait for it.
  held.release();
  recclResult_t rc = startInit(newcomm, cfg, static_cast<int>(group.size()), *id, newRank);
  core::wipeKey(id->bootKey);
  return rc;
}

// What a revoked comm's split hands over: no shrink excludes rank -1, so no shrink's note is
// taken for it, nor its note for a shrink's. Its serials have the top bit set: a leader's note is
// also matched by serial alone (takeShrinkNote: "leads this shrink with another list"), and a
// shrink's serial never reaches it.
std::array<std::byte, core::kShrinkDigestBytes> revokedSplitDigest() { return core::Comm::shrinkDigest({-1}); }
constexpr uint32_t kSplitSerialBit = 0x80000000u;

}  // namespace

extern "C" recclResult_t recclCommSplit(recclComm_t comm, int color, int key, recclComm_t* newcomm,
                                        recclConfig_t* config) {
  if (newcomm) *newcomm = nullptr;
  return guardedOn(comm, [&](CallTicket& held) -> recclResult_t {
    core::Comm* parent = nullptr;
    RECCL_CHECK(usable(comm, &parent, /*revokedOk=*/true));
    // Counted on every split, revoked or not, before any check can fail (as recclCommShrink
    // counts): a rank whose call is refused, or whose comm a revoke on another thread reached
    // just after this split began, counts it as the ranks whose calls go on do, and the next
    // split pairs the same calls on every rank.
    const uint32_t serial = parent->nextShrinkSerial(revokedSplitDigest()) | kSplitSerialBit;
    const bool revoked = settle(comm) == recclComm::kRevoked;
    const int n = parent->nranks();
    const int me = parent->rank();
    if (!newcomm) return fail(recclInvalidArgument, "newcomm: null pointer");
    *newcomm = nullptr;
    if (color < 0 && color != RECCL_SPLIT_NOCOLOR)
      return fail(recclInvalidArgument,
                  "color: " + std::to_string(color) + " is negative and not RECCL_SPLIT_NOCOLOR (" +
                      std::to_string(RECCL_SPLIT_NOCOLOR) + ")");
    CommConfig cfg;
    Status cfgStatus = readConfig(config, comm->config, &cfg);
    if (!revoked) return splitOver(*comm, n, me, color, key, cfgStatus, cfg, newcomm, held);

    // The exchange communicator: every rank of comm, comm's settings but one channel (two small
    // all-gathers) and config's bootstrap timeout, blocking, closed when the split is done. Only its handover needs comm; an
    // abort or destroy of comm after it need not wait for the rest.
    Handover h{{}, revokedSplitDigest(), serial, "recclCommSplit", "the ranks' calls differ"};
    for (int r = 0; r < n; ++r) h.members.push_back(r);
    CommConfig xcfg = comm->config;
    xcfg.blocking = true;
    xcfg.nChannels = 1;
    if (cfgStatus.ok() && cfg.bootstrapTimeoutMs != CommConfig::kUnset) xcfg.bootstrapTimeoutMs = cfg.bootstrapTimeoutMs;
    xcfg.name = (comm->config.name.empty() ? std::string() : comm->config.name + " ") + "split exchange";
    recclComm_t exchange = nullptr;
    recclResult_t rc = startInitAfter(&exchange, xcfg, n, me, [&](const std::atomic<bool>*) {
      auto id = [&] {
        const core::Comm::ShrinkClaim claim(*parent, h.digest, h.serial);
        return handOver(comm, *parent, h, xcfg);
      }();
      held.release();
      return id;
    });
    struct Close {
      recclComm_t c;
      ~Close() {
        if (!c) return;
        const std::string split = lastError();  // the split's own error, if any, stays the last one
        if (recclCommDestroy(c) != recclSuccess)
          RECCL_WARN(kLogInit, "recclCommSplit: closing the exchange communicator: %s", lastError().c_str());
        lastError() = split;
      }
    } close{exchange};
    if (rc != recclSuccess) return rc;
    return splitOver(*exchange, n, me, color, key, cfgStatus, cfg, newcomm, held);
  });
}
