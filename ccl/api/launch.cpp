#include "api/launch.h"

#include <chrono>
#include <string>

#include "algo/cost.h"

#if RECCL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "stream/cuda_queue.h"
#include "transport/cuda/cuda_status.h"
#include "transport/cuda/device_probe.h"
#include "transport/cuda/memory_kind.h"
#endif

namespace reccl::api {
namespace {

#if RECCL_HAVE_CUDA
Result<stream::Queue*> deviceQueue(recclComm& comm) {
  std::lock_guard lk(comm.deviceMu);
  if (!comm.device) {
    RECCL_ASSIGN_OR_RETURN(stream::QueueOptions opts, stream::QueueOptions::fromEnv());
    RECCL_ASSIGN_OR_RETURN(auto q, stream::CudaQueue::create(*comm.impl, opts));
    comm.device = std::move(q);
  }
  return comm.device.get();
}

// Device (or managed) memory among the call's buffers. Asks CUDA only once this process has a
// context: before that no buffer can be device memory, and host-only users never create one.
Result<bool> touchesDevice(const algo::Collective& c) {
  if (!cuda::anyContextActive()) return false;
  for (std::byte* b : stream::userBuffers(c)) {
    RECCL_ASSIGN_OR_RETURN(cuda::PointerInfo info, cuda::classifyPointer(b));
    if (cuda::needsGpuCopy(info.kind)) return true;
  }
  return false;
}
#endif

stream::Queue* existingQueue(recclComm& comm) {
  std::lock_guard lk(comm.deviceMu);
  return comm.device.get();
}

}  // namespace

Status checkStream(recclStream_t stream) {
#if RECCL_HAVE_CUDA
  if (stream != nullptr && cuda::deviceCount() == 0)
    return Status(Errc::kInvalidArgument, "stream: given, but this process has " + cuda::noDeviceReason());
#else
  if (stream != nullptr) return Status(Errc::kInvalidArgument, "stream: must be NULL (host build, no CUDA streams)");
#endif
  return Status::Ok();
}

Status checkHostReadable([[maybe_unused]] const void* p, [[maybe_unused]] const char* what) {
#if RECCL_HAVE_CUDA
  if (!cuda::anyContextActive()) return Status::Ok();  // no context: no device memory either
  RECCL_ASSIGN_OR_RETURN(cuda::PointerInfo info, cuda::classifyPointer(p));
  if (info.kind == cuda::MemoryKind::kDevice)
    return Status(Errc::kInvalidArgument, std::string(what) + ": device memory; reccl reads it on the host (host, pinned or managed memory)");
#endif
  return Status::Ok();
}

int callerDevice() noexcept {
#if RECCL_HAVE_CUDA
  int d = -1;
  if (cuda::anyContextActive() && cudaGetDevice(&d) == cudaSuccess) return d;
#endif
  return -1;
}

void useDevice(int device) noexcept {
  if (device >= 0) (void)setDevice(device);
}

Status checkDeviceList([[maybe_unused]] const int* devlist, [[maybe_unused]] int n) {
#if RECCL_HAVE_CUDA
  const int have = cuda::deviceCount();
  if (have == 0) return Status(Errc::kInvalidArgument, "devlist: given, but this process has " + cuda::noDeviceReason());
  for (int i = 0; i < n; ++i)
    if (devlist[i] < 0 || devlist[i] >= have)
      return Status(Errc::kInvalidArgument, "devlist[" + std::to_string(i) + "]: device " + std::to_string(devlist[i]) +
                                                " is not one of this process's " + std::to_string(have));
  return Status::Ok();
#else
  return Status(Errc::kInvalidUsage,
                std::string("devlist: ") + kNoCudaPath + "; pass NULL (the ranks are threads on the host)");
#endif
}

Status setDevice([[maybe_unused]] int device) {
#if RECCL_HAVE_CUDA
  return cuda::cudaStatus(cudaSetDevice(device), "devlist: cudaSetDevice(" + std::to_string(device) + ")");
#else
  return Status(Errc::kInvalidUsage, std::string("devlist: ") + kNoCudaPath);
#endif
}

Status launch(recclComm& comm, const algo::Collective& c, recclStream_t stream) {
  core::Comm& impl = *comm.impl;
  RECCL_TRY(checkStream(stream));
#if RECCL_HAVE_CUDA
  bool device = stream != nullptr;
  if (!device) {
    RECCL_ASSIGN_OR_RETURN(device, touchesDevice(c));
  }
  if (device) {
    RECCL_ASSIGN_OR_RETURN(stream::Queue * q, deviceQueue(comm));
    return q->enqueue(c, stream);
  }
#endif
  if (stream::Queue* q = existingQueue(comm); q && !q->idle()) return q->runAfterQueued(c);
  // What the call took teaches the communicator's cost model, unless it made connections.
  const uint64_t ports = impl.portsMade();
  const auto start = std::chrono::steady_clock::now();
  Status s = impl.run([&] { return algo::run(impl, c); });
  if (s.ok() && impl.portsMade() == ports)
    comm.cost.observe(algo::costOf(impl, c), std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return s;
}

Status deviceAsyncError(recclComm& comm) {
  stream::Queue* q = existingQueue(comm);
  return q ? q->asyncError() : Status::Ok();
}

void abortDevice(recclComm& comm) noexcept {
  if (stream::Queue* q = existingQueue(comm)) q->abort();
}

bool deviceIdle(recclComm& comm) {
  stream::Queue* q = existingQueue(comm);
  return !q || q->idle();
}

}  // namespace reccl::api
