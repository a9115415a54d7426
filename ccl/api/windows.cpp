// Windows (recclCommWindowRegister / recclCommWindowDeregister, NCCL 2.27's ncclCommWindow*):
// collective registrations. Every rank of the communicator registers its buffer in the same call,
// and the ranks agree over the communicator's connections on what they registered before any of
// them keeps it: the same flags, the same size (NCCL's default rule), and, on deregistration,
// the same window. A window is bookkeeping as a registration is (api/registrations.h): no
// transport of reccl needs one to move a buffer, symmetric or not. What the agreement buys is
// NCCL's contract: a rank that registers something else, or deregisters another window, is named
// on every rank instead of being silently different.
#include <cstdint>
#include <string>
#include <vector>

#include "algo/collective.h"
#include "api/api_result.h"
#include "api/comm_handle.h"
#include "api/group.h"
#include "api/launch.h"
#include "reccl/reccl.h"

using namespace reccl;
using namespace reccl::api;

namespace {

// What each rank says in a window call's exchange.
enum : uint64_t { kNoRoom = 0, kRegister = 1, kDeregister = 2 };
struct Said {
  uint64_t what = kNoRoom;
  uint64_t size = 0;     // register: the buffer's bytes
  uint64_t flags = 0;    // register: winFlags
  uint64_t ordinal = 0;  // deregister: which of comm's windows, in the order they were registered
};
constexpr size_t kSaidWords = sizeof(Said) / sizeof(uint64_t);

const char* callName(uint64_t what) {
  return what == kRegister ? "recclCommWindowRegister" : what == kDeregister ? "recclCommWindowDeregister" : "?";
}

// The exchange over comm (every rank takes part, one that cannot take the window included, so
// that the others learn it instead of waiting for it), then the check of what the others said
// against this rank's `mine`: the first rank that differs, named.
Status agree(recclComm& comm, const Said& mine, int me, int n) {
  std::vector<Said> all(static_cast<size_t>(n));
  const algo::Collective gather{algo::CollKind::kAllGather, &mine, all.data(), kSaidWords, recclUint64, recclSum, 0, {}, {}};
  RECCL_TRY(launch(comm, gather, nullptr));
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    const Said& s = all[static_cast<size_t>(r)];
    const std::string who = "rank " + std::to_string(r);
    if (s.what == kNoRoom)
      return Status(Errc::kInvalidUsage, who + " could not take the window (its communicator holds as many as it may); no rank "
                                             "changed its windows");
    if (s.what != mine.what)
      return Status(Errc::kInvalidUsage, who + " called " + callName(s.what) + " where this rank called " +
                                             callName(mine.what) + "; no rank changed its windows");
    if (s.what == kRegister && s.flags != mine.flags)
      return Status(Errc::kInvalidUsage, who + " registered its window with winFlags " + std::to_string(s.flags) +
                                             ", this rank with " + std::to_string(mine.flags) +
                                             "; every rank must pass the same flags");
    if (s.what == kRegister && s.size != mine.size)
      return Status(Errc::kInvalidUsage, who + " registered a window of " + std::to_string(s.size) +
                                             " bytes, this rank one of " + std::to_string(mine.size) +
                                             "; every rank's window must be as large");
    if (s.what == kDeregister && s.ordinal != mine.ordinal)
      return Status(Errc::kInvalidUsage, who + " deregistered its window number " + std::to_string(s.ordinal) +
                                             " (in registration order), this rank its number " +
                                             std::to_string(mine.ordinal) + "; every rank must end the same window");
  }
  return Status::Ok();
}

// A window call inside a group: refused (NCCL would fill the handle only at the group's end).
recclResult_t refusedInGroup(const char* call) {
  return fail(recclInvalidUsage, std::string(call) + ": not inside a group (call it before recclGroupStart)");
}

Status checkFlags(int winFlags) {
  if (winFlags & ~RECCL_WIN_COLL_SYMMETRIC)
    return Status(Errc::kInvalidArgument, "winFlags: " + std::to_string(winFlags) +
                                              " has bits other than RECCL_WIN_COLL_SYMMETRIC (" +
                                              std::to_string(RECCL_WIN_COLL_SYMMETRIC) + ")");
  return Status::Ok();
}

}  // namespace

extern "C" {

recclResult_t recclCommWindowRegister(recclComm_t comm, void* buff, size_t size, recclWindow_t* win, int winFlags) {
  return guardedOn(comm, [&]() -> recclResult_t {
    if (!win) return fail(recclInvalidArgument, "win: null pointer");
    *win = nullptr;
    core::Comm* c = nullptr;
    RECCL_CHECK(usable(comm, &c));
    if (inGroup()) return refusedInGroup("recclCommWindowRegister");
    RECCL_CHECK(finish(checkFlags(winFlags)));
    RECCL_CHECK(finish(Registrations::checkRange(buff, size)));
    // Past the arguments, which a caller gets wrong on its own (refused at once, as a split's),
    // what this rank holds: the others learn of it through the exchange.
    const Status room = comm->windows.checkRoom();
    Said mine;
    if (room.ok()) mine = {kRegister, size, static_cast<uint64_t>(winFlags), 0};
    const Status agreed = agree(*comm, mine, c->rank(), c->nranks());
    if (!room.ok()) return fail(room);
    RECCL_CHECK(finish(agreed));
    // Only now, on every rank alike: the ordinals of comm's windows stay the same on all.
    auto made = comm->windows.add(buff, size);
    if (!made.ok()) return fail(made.status());
    *win = static_cast<recclWindow_t>(*made);
    return recclSuccess;
  });
}

recclResult_t recclCommWindowDeregister(recclComm_t comm, recclWindow_t win) {
  return guardedOn(comm, [&]() -> recclResult_t {
    // A communicator that can take no more work (failed, revoked, finalized): its windows are
    // let go here alone, as its peers' are on theirs.
    if (settle(comm) != recclComm::kReady || !comm->impl || !comm->impl->asyncError().ok())
      return finish(comm->windows.remove(win));
    core::Comm* c = comm->impl.get();
    if (inGroup()) return refusedInGroup("recclCommWindowDeregister");
    Result<uint64_t> ordinal = comm->windows.ordinal(win);
    if (!ordinal.ok()) return fail(ordinal.status());
    const Said mine{kDeregister, 0, 0, *ordinal};
    RECCL_CHECK(finish(agree(*comm, mine, c->rank(), c->nranks())));
    return finish(comm->windows.remove(win));
  });
}

}  // extern "C"
