// recclCommRevoke (NCCL's ncclCommRevoke): a communicator's work stopped without freeing it, from
// any thread, so that a watchdog can end a collective that waits for a dead rank and the
// survivors can go on with recclCommShrink (RECCL_SHRINK_DEFAULT: nothing is left to abort) or
// close it. The core communicator breaks as at an abort: its calls in flight return at once
// (recclAborted, naming the revoke), its connections fail (its peers stop waiting for this
// rank), stream work stops. The handle stays, and so does its data listener, which is all a
// shrink needs of it. recclCommGetAsyncError says recclInProgress until it is quiet, then
// recclSuccess, as NCCL's does (api/init.cpp).
#include "api/api_result.h"
#include "api/comm_handle.h"
#include "api/launch.h"
#include "core/comm.h"
#include "reccl/reccl.h"

using namespace reccl;
using namespace reccl::api;

extern "C" recclResult_t recclCommRevoke(recclComm_t comm, int revokeFlags) {
  return guardedOn(comm, [&]() -> recclResult_t {
    if (revokeFlags != RECCL_REVOKE_DEFAULT)
      return fail(recclInvalidArgument,
                  "revokeFlags: " + std::to_string(revokeFlags) + " is not RECCL_REVOKE_DEFAULT (the only flag)");
    settle(comm);  // a finished non-blocking init or finalize moves the state on first
    bool revoked = false;
    {
      // Only a ready communicator is revoked; the state moves under the lock finalize takes too.
      std::lock_guard lk(comm->settleMu);
      int was = recclComm::kReady;
      revoked = comm->state.compare_exchange_strong(was, recclComm::kRevoked, std::memory_order_acq_rel);
      if (was == recclComm::kRevoked) return recclSuccess;  // a watchdog's second word changes nothing
      if (was == recclComm::kFinalizing)
        return fail(recclInvalidUsage, "comm: its non-blocking recclCommFinalize is running; recclCommAbort stops it");
    }
    core::Comm* c = nullptr;
    RECCL_CHECK(usable(comm, &c, /*revokedOk=*/true));  // names an init still running or failed, a finalized comm
    if (!revoked)  // not ready above, ready now: a non-blocking init that ended in between
      return fail(recclInvalidUsage, "comm: its non-blocking init ended during the revoke; revoke it again");
    abortDevice(*comm);  // stops waiting for streams first: its worker may be inside the communicator
    c->revoke();
    return recclSuccess;
  });
}
