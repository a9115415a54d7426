// recclCommShrink (NCCL's ncclCommShrink): a child of the parent's ranks but the excluded ones,
// made without a collective over the parent (the excluded ranks may be dead, and the parent's
// connections with them): the lowest rank left hands the others the child's rendezvous
// (api/handover.h), and each member joins the child as recclCommInitRank does. The note carries a
// digest of the excluded list, so ranks that passed different lists fail instead of forming
// different groups.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "api/api_result.h"
#include "api/comm_handle.h"
#include "api/handover.h"
#include "api/launch.h"
#include "core/comm.h"
#include "core/wire.h"
#include "reccl/reccl.h"

using namespace reccl;
using namespace reccl::api;

namespace {

// The excluded ranks, sorted, after checking them; *out empty on failure.
recclResult_t readExcluded(const int* list, int count, int nranks, int me, std::vector<int>* out) {
  if (count < 0) return fail(recclInvalidArgument, "excludeRanksCount: " + std::to_string(count) + " is negative");
  if (count > 0 && !list) return fail(recclInvalidArgument, "excludeRanksList: null with a count of " + std::to_string(count));
  std::vector<int> ex(list, list + count);
  std::sort(ex.begin(), ex.end());
  for (size_t i = 0; i < ex.size(); ++i) {
    if (ex[i] < 0 || ex[i] >= nranks)
      return fail(recclInvalidArgument, "excludeRanksList: rank " + std::to_string(ex[i]) + " is not in [0, " +
                                            std::to_string(nranks) + ")");
    if (i > 0 && ex[i] == ex[i - 1])
      return fail(recclInvalidArgument, "excludeRanksList: rank " + std::to_string(ex[i]) + " is listed twice");
    if (ex[i] == me)
      return fail(recclInvalidArgument, "excludeRanksList: holds this rank (" + std::to_string(me) +
                                            "); an excluded rank does not call recclCommShrink");
  }
  *out = std::move(ex);
  return recclSuccess;
}

}  // namespace

extern "C" recclResult_t recclCommShrink(recclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                         recclComm_t* newcomm, recclConfig_t* config, int shrinkFlags) {
  if (newcomm) *newcomm = nullptr;
  return guardedOn(comm, [&](CallTicket& held) -> recclResult_t {
    core::Comm* parent = nullptr;
    RECCL_CHECK(usable(comm, &parent, /*revokedOk=*/true));  // a revoked parent's listener still answers
    const int n = parent->nranks(), me = parent->rank();
    std::vector<int> excluded;
    RECCL_CHECK(readExcluded(excludeRanksList, excludeRanksCount, n, me, &excluded));
    // Counted before any other check can fail: a rank whose call is refused below still counts
    // this shrink, as the ranks whose calls go on do.
    const auto digest = core::Comm::shrinkDigest(excluded);
    const uint32_t serial = parent->nextShrinkSerial(digest);
    if (!newcomm) return fail(recclInvalidArgument, "newcomm: null pointer");
    if (shrinkFlags != RECCL_SHRINK_DEFAULT && shrinkFlags != RECCL_SHRINK_ABORT)
      return fail(recclInvalidArgument, "shrinkFlags: " + std::to_string(shrinkFlags) +
                                            " is neither RECCL_SHRINK_DEFAULT nor RECCL_SHRINK_ABORT");
    CommConfig cfg;
    if (Status s = readConfig(config, comm->config, &cfg); !s.ok()) return fail(s);
    if (shrinkFlags == RECCL_SHRINK_ABORT) {
      // The parent's calls in flight return (its connections fail), its stream work stops; its
      // listener keeps answering, which is all the handover below needs of it.
      abortDevice(*comm);
      parent->abort();
    }
    Handover h{{}, digest, serial, "recclCommShrink", "the ranks passed different exclude lists"};
    for (int r = 0; r < n; ++r)
      if (!std::binary_search(excluded.begin(), excluded.end(), r)) h.members.push_back(r);
    const int newRank = static_cast<int>(std::find(h.members.begin(), h.members.end(), me) - h.members.begin());
    const int nmembers = static_cast<int>(h.members.size());
    // The handover needs the parent (its listener, its key) and so holds it; the child's init
    // needs nothing of it: the hold ends with the handover. A non-blocking config runs both on
    // the child's init thread.
    // The hold lives in the source alone: let go when the source is, right after the handover.
    // With it the claim on this shrink's note, which a later shrink's take would otherwise drop
    // when this one's take comes second (each non-blocking call's handover has a thread).
    struct Hold {
      Hold(CallTicket t, core::Comm& c, const Handover& h) : ticket(std::move(t)), claim(c, h.digest, h.serial) {}
      CallTicket ticket;
      core::Comm::ShrinkClaim claim;  // declared after: let go before the ticket
    };
    auto hold = std::make_shared<Hold>(std::move(held), *parent, h);
    return startInitAfter(newcomm, cfg, nmembers, newRank,
                          [comm, parent, h = std::move(h), cfg, hold = std::move(hold)](
                              const std::atomic<bool>* cancel) { return handOver(comm, *parent, h, cfg, cancel); });
  });
}
