#include "transport/cuda/cuda_owners.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "transport/cuda/cuda_status.h"

namespace reccl::cuda {

Result<Stream> Stream::create() {
  cudaStream_t s = nullptr;
  RECCL_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}

Result<Event> Event::create(bool timing) {
  cudaEvent_t e = nullptr;
  RECCL_CUDA_TRY(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Event(e);
}

Status Event::wait(Deadline d) const { return waitEvent(get(), d); }

Status waitEvent(cudaEvent_t ev, Deadline d) {
  // Poll: yields at first (a collective's last copy is usually microseconds away), then sleeps
  // up to 1 ms between looks.
  auto sleep = std::chrono::microseconds(0);
  for (;;) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess) return Status::Ok();
    if (e != cudaErrorNotReady) return cudaStatus(e, "cudaEventQuery");
    if (d.expired()) return Status(Errc::kTimeout, "cuda event: the stream did not reach it before the deadline");
    if (sleep.count() == 0)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(sleep);
    sleep = std::min(std::chrono::microseconds(1000), sleep + std::chrono::microseconds(20));
  }
}

Result<PinnedBuffer> PinnedBuffer::create(size_t bytes, bool mapped) {
  void* p = nullptr;
  RECCL_CUDA_TRY(cudaHostAlloc(&p, bytes, cudaHostAllocPortable | (mapped ? cudaHostAllocMapped : 0u)));
  return PinnedBuffer(p);
}

Result<DeviceBuffer> DeviceBuffer::create(size_t bytes) {
  void* p = nullptr;
  RECCL_CUDA_TRY(cudaMalloc(&p, bytes));
  return DeviceBuffer(p);
}

Result<IpcMapping> IpcMapping::open(const cudaIpcMemHandle_t& h) {
  void* p = nullptr;
  RECCL_CUDA_TRY(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
  return IpcMapping(p);
}

DeviceGuard::DeviceGuard(int device) noexcept {
  if (cudaGetDevice(&prev_) != cudaSuccess) {
    (void)cudaGetLastError();
    prev_ = -1;
  }
  ok_ = device < 0 || device == prev_ || cudaSetDevice(device) == cudaSuccess;
  if (!ok_) (void)cudaGetLastError();
}

DeviceGuard::~DeviceGuard() {
  if (prev_ >= 0) (void)cudaSetDevice(prev_);
}

}  // namespace reccl::cuda
