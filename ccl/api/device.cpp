// The C API's calls about memory and devices, NCCL's: a communicator's CUDA device
// (recclCommCuDevice), device memory for buffers (recclMemAlloc, recclMemFree), and buffer
// registration (recclCommRegister, recclCommDeregister; api/registrations.h says what a
// registration does here). Nothing throws across this boundary.
#include "reccl/reccl.h"

#include <mutex>
#include <string>
#include <unordered_set>

#include "api/api_result.h"
#include "api/comm_handle.h"
#include "api/launch.h"

#if RECCL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "transport/cuda/cuda_status.h"
#include "transport/cuda/device_probe.h"
#endif

using namespace reccl::api;

namespace {

#if RECCL_HAVE_CUDA
// What recclMemAlloc handed out and recclMemFree has not taken back: only those are freed, so a
// pointer of the caller's own (a cudaMalloc'd one, an offset into ours) is refused, not freed.
struct DeviceAllocations {
  std::mutex mu;
  std::unordered_set<void*> live;
};
DeviceAllocations& allocations() {
  static auto* a = new DeviceAllocations;  // never destroyed: a free at process exit still finds it
  return *a;
}
#endif

}  // namespace

extern "C" {

recclResult_t recclCommCuDevice(const recclComm_t comm, int* device) {
  return guardedOn(comm, [&]() -> recclResult_t {
    if (!device) return fail(recclInvalidArgument, "device: null pointer");
#if RECCL_HAVE_CUDA
    const int d = comm->config.cudaDevice;
    if (d < 0)
      return fail(recclInvalidUsage,
                  "comm: made with no CUDA device current (its ranks run on the host); cudaSetDevice before the "
                  "init gives a communicator its device");
    *device = d;
    return recclSuccess;
#else
    return fail(recclInvalidUsage, std::string("comm: ") + kNoCudaPath + ", so no device");
#endif
  });
}

recclResult_t recclMemAlloc(void** ptr, size_t size) {
  return guarded([&]() -> recclResult_t {
    if (!ptr) return fail(recclInvalidArgument, "ptr: null pointer");
    *ptr = nullptr;
    if (size == 0) return fail(recclInvalidArgument, "size: 0 bytes");
#if RECCL_HAVE_CUDA
    if (reccl::cuda::deviceCount() == 0)
      return fail(recclUnhandledCudaError, "recclMemAlloc: this process has " + reccl::cuda::noDeviceReason());
    void* p = nullptr;
    if (reccl::Status s = reccl::cuda::cudaStatus(cudaMalloc(&p, size), "cudaMalloc"); !s.ok()) return fail(s);
    try {
      DeviceAllocations& a = allocations();
      std::lock_guard lk(a.mu);
      a.live.insert(p);
    } catch (...) {
      (void)cudaFree(p);
      throw;
    }
    *ptr = p;
    return recclSuccess;
#else
    return fail(recclInvalidUsage,
                std::string("recclMemAlloc: ") + kNoCudaPath + "; host buffers need no allocator of reccl's");
#endif
  });
}

recclResult_t recclMemFree(void* ptr) {
  return guarded([&]() -> recclResult_t {
    if (!ptr) return recclSuccess;
#if RECCL_HAVE_CUDA
    {
      DeviceAllocations& a = allocations();
      std::lock_guard lk(a.mu);
      if (a.live.erase(ptr) == 0)
        return fail(recclInvalidArgument, "ptr: not from recclMemAlloc, or freed already");
    }
    return finish(reccl::cuda::cudaStatus(cudaFree(ptr), "cudaFree"));
#else
    return fail(recclInvalidArgument, std::string("ptr: not from recclMemAlloc (") + kNoCudaPath + ": it allocates none)");
#endif
  });
}

recclResult_t recclCommRegister(const recclComm_t comm, void* buff, size_t size, void** handle) {
  return guardedOn(comm, [&]() -> recclResult_t {
    if (!handle) return fail(recclInvalidArgument, "handle: null pointer");
    *handle = nullptr;
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(usable(comm, &c));
    auto h = comm->registrations.add(buff, size);
    if (!h.ok()) return fail(h.status());
    *handle = *h;
    return recclSuccess;
  });
}

recclResult_t recclCommDeregister(const recclComm_t comm, void* handle) {
  // Whatever state the communicator is in (finalized, revoked, failed): a registration made on
  // it can always be let go until the handle is closed.
  return guardedOn(comm, [&]() -> recclResult_t { return finish(comm->registrations.remove(handle)); });
}

}  // extern "C"
