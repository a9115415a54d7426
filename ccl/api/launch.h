// Where a collective call goes (docs/cuda.md): a call with a CUDA stream or device buffers to
// the communicator's stream layer (enqueued, NCCL's semantics); a host call with a NULL stream
// runs at once on the calling thread, as it always did, unless stream work is still pending on
// the communicator (then in order after it). Builds without CUDA refuse a stream.
#pragma once

#include "algo/collective.h"
#include "api/comm_handle.h"
#include "reccl/reccl.h"

namespace reccl::api {

Status launch(recclComm& comm, const algo::Collective& c, recclStream_t stream);
// The stream argument alone (a stream needs a CUDA build and a device): what launch() checks
// first, for a call that a group queues.
Status checkStream(recclStream_t stream);
// What a build without CUDA says when refusing a device call.
inline constexpr char kNoCudaPath[] = "this build of reccl has no CUDA path (RECCL_CUDA=off)";
// The calling thread's CUDA device where this process has a CUDA context, else -1; and making it
// another thread's (a group runs its communicators on threads of their own).
int callerDevice() noexcept;
void useDevice(int device) noexcept;
// recclCommInitAll's devlist: n devices of this process (a build without CUDA has none); and
// making one current on a rank's thread, with CUDA's error.
Status checkDeviceList(const int* devlist, int n);
Status setDevice(int device);
// `p` is memory the host reads directly (not CUDA device memory); `what` names it in the error.
Status checkHostReadable(const void* p, const char* what);
// The stream layer's first error (Ok without one, or without a stream layer).
Status deviceAsyncError(recclComm& comm);
// recclCommAbort: the stream layer stops waiting for streams before the communicator aborts.
void abortDevice(recclComm& comm) noexcept;
// No stream work queued or running (true without a stream layer).
bool deviceIdle(recclComm& comm);

}  // namespace reccl::api
