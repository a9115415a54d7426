// Internal to the C API: recclGroupStart/recclGroupEnd. Between them the calling thread's
// collectives and sends/receives are checked and queued, not run; the outermost recclGroupEnd
// runs them: each communicator's collectives in call order, then all its sends/receives as one
// operation (they progress together), and the communicators of one group at once, each on a
// thread of its own (on the caller's CUDA device), so that one thread can drive several
// communicators (recclCommInitAll's) as with NCCL.
#pragma once

#include "algo/collective.h"
#include "reccl/reccl.h"

namespace reccl::api {

void groupStart() noexcept;
// recclInvalidUsage without a recclGroupStart; else Success for an inner one, or the first
// failure of the group's communicators (in order of their first call).
recclResult_t groupEnd();
// recclGroupSimulateEnd: ends the group as groupEnd does but runs nothing; the estimate of how
// long it would have taken goes to info->estimatedTime (api/cost_model.h).
recclResult_t groupSimulateEnd(recclSimInfo_t* info);
// True inside a group: the call goes to `queue` instead of running.
bool inGroup() noexcept;
void queue(recclComm_t comm, const algo::Collective& c, recclStream_t stream);
// recclCommDestroy/recclCommAbort on a communicator with operations queued in an open group (of
// any thread): they are dropped, and that group's recclGroupEnd fails naming them.
void forgetQueued(recclComm_t comm);

}  // namespace reccl::api
