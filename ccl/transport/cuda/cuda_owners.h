// RAII owners of the CUDA objects reccl creates: streams, events, pinned host memory, device
// memory, another process's memory opened through CUDA IPC, and the current device. Move-only;
// destructors never throw and ignore the driver's answer (at process exit it may be gone).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "reccl/common/deadline.h"
#include "reccl/common/status.h"

namespace reccl::cuda {

template <typename H, typename Traits>
class CudaHandle {
 public:
  CudaHandle() = default;
  explicit CudaHandle(H h) noexcept : h_(h) {}
  CudaHandle(CudaHandle&& o) noexcept : h_(std::exchange(o.h_, H{})) {}
  CudaHandle& operator=(CudaHandle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, H{});
    }
    return *this;
  }
  CudaHandle(const CudaHandle&) = delete;
  CudaHandle& operator=(const CudaHandle&) = delete;
  ~CudaHandle() { reset(); }
  H get() const noexcept { return h_; }
  explicit operator bool() const noexcept { return h_ != H{}; }
  void reset() noexcept {
    if (h_ != H{}) Traits::destroy(h_);
    h_ = H{};
  }
  // Hands the object over without destroying it.
  H release() noexcept { return std::exchange(h_, H{}); }

 private:
  H h_{};
};

struct StreamTraits {
  static void destroy(cudaStream_t s) noexcept { (void)cudaStreamDestroy(s); }
};
struct EventTraits {
  static void destroy(cudaEvent_t e) noexcept { (void)cudaEventDestroy(e); }
};
struct PinnedTraits {
  static void destroy(void* p) noexcept { (void)cudaFreeHost(p); }
};
struct DeviceMemTraits {
  static void destroy(void* p) noexcept { (void)cudaFree(p); }
};
struct IpcMemTraits {
  static void destroy(void* p) noexcept { (void)cudaIpcCloseMemHandle(p); }
};

// A stream that never synchronizes with the legacy default stream.
class Stream : public CudaHandle<cudaStream_t, StreamTraits> {
 public:
  using CudaHandle::CudaHandle;
  static Result<Stream> create();
};

// An event without timing (cheaper to record); blockingSync makes host waits sleep.
class Event : public CudaHandle<cudaEvent_t, EventTraits> {
 public:
  using CudaHandle::CudaHandle;
  static Result<Event> create(bool timing = false);
  Status wait(Deadline d) const;
};

// Waits for an event on the host, polling, until the deadline: no wait in reccl is unbounded,
// and a plain cudaEventSynchronize is when the stream never gets there.
Status waitEvent(cudaEvent_t e, Deadline d);

// Page-locked host memory every device can copy to and from (cudaHostAllocPortable); `mapped`
// also gives it a device address (cudaHostGetDevicePointer) for the stream gate.
class PinnedBuffer : public CudaHandle<void*, PinnedTraits> {
 public:
  using CudaHandle::CudaHandle;
  static Result<PinnedBuffer> create(size_t bytes, bool mapped = false);
  std::byte* data() const noexcept { return static_cast<std::byte*>(get()); }
};

class DeviceBuffer : public CudaHandle<void*, DeviceMemTraits> {
 public:
  using CudaHandle::CudaHandle;
  static Result<DeviceBuffer> create(size_t bytes);
  std::byte* data() const noexcept { return static_cast<std::byte*>(get()); }
};

// Another process's device memory, opened from its cudaIpcMemHandle_t.
class IpcMapping : public CudaHandle<void*, IpcMemTraits> {
 public:
  using CudaHandle::CudaHandle;
  static Result<IpcMapping> open(const cudaIpcMemHandle_t& h);
  std::byte* data() const noexcept { return static_cast<std::byte*>(get()); }
};

// Makes `device` current for the scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) noexcept;
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  bool ok() const noexcept { return ok_; }

 private:
  int prev_ = -1;
  bool ok_ = false;
};

}  // namespace reccl::cuda
