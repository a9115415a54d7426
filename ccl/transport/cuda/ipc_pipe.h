// The CUDA IPC pipe between a rank whose rail failed (the origin) and a same-host rank that
// forwards its traffic (the relay): the GPU twin of the shared-memory relay pipe
// (failover/relay_pipe.h), with the same shape so the relay route can take either. Two
// single-producer/single-consumer byte rings, "up" (origin -> relay) and "down" (relay ->
// origin), whose bytes live in device memory the origin allocates and exports
// (cudaIpcGetMemHandle; the relay maps it with cudaIpcOpenMemHandle), so a step moves GPU to GPU
// over NVLink or PCIe peer copies instead of through host memory. Their counters, the handle and
// a broken flag live in a small memfd both ends map; one eventfd per end wakes it.
//
// A write copies into the ring on this end's own stream, waits for the copy and only then
// publishes the bytes (head); a read copies out, waits, then frees them (tail). Sources and
// destinations may be device or host memory (cudaMemcpyDefault).
//
// The origin creates the memfd and the eventfds and hands them to the relay over the relay's
// control socket (SCM_RIGHTS), exactly as for the shared-memory pipe: no name anywhere, nothing
// left behind when either process dies.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "reccl/common/deadline.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "transport/cuda/cuda_owners.h"

namespace reccl::cuda {

inline constexpr uint32_t kIpcPipeMagic = 0x50494343;  // "CCIP"

// Why the relay broke a pipe (IpcPipeShared::broken); the values of failover's RelayBreak.
enum class IpcPipeBreak : uint32_t { kNone = 0, kLink = 1, kPeerClosed = 2 };

struct IpcRingCounters {
  alignas(64) std::atomic<uint64_t> head;  // bytes written, ever (producer)
  alignas(64) std::atomic<uint64_t> tail;  // bytes read, ever (consumer)
};

struct IpcPipeShared {
  uint32_t magic;
  uint32_t ringBytes;  // per direction, a power of two
  int32_t device;      // the origin's device (the relay opens the memory on its own)
  uint32_t reserved;
  cudaIpcMemHandle_t mem;  // both rings: up at 0, down at ringBytes
  IpcRingCounters up;
  IpcRingCounters down;
  alignas(64) std::atomic<uint32_t> broken;  // IpcPipeBreak, set by the relay
};
inline constexpr size_t kIpcPipeHeaderBytes = 4096;
static_assert(sizeof(IpcPipeShared) <= kIpcPipeHeaderBytes);

// One direction as one end sees it: counters in the shared header, bytes in device memory.
class IpcRing {
 public:
  IpcRing() = default;
  IpcRing(IpcRingCounters* c, std::byte* data, uint32_t bytes, cudaStream_t s, cudaEvent_t e)
      : c_(c), data_(data), bytes_(bytes), stream_(s), event_(e) {}
  size_t free() const noexcept { return bytes_ - used(); }
  // Garbage counters (a misbehaving peer) read as an empty ring.
  size_t used() const noexcept;
  // Producer: copies min(n, free()) bytes of src in (at most two copies at the wrap), waits for
  // them until `d`, publishes them. Returns the bytes taken.
  Result<size_t> write(const void* src, size_t n, Deadline d);
  // Consumer: copies min(n, used()) bytes out, waits, frees them. Returns the bytes moved.
  Result<size_t> read(void* dst, size_t n, Deadline d);

 private:
  // Copies n bytes between `ext` and the ring from byte position `pos` on (two copies at the
  // wrap) and waits for them.
  Status transfer(uint64_t pos, std::byte* ext, size_t n, bool intoRing, Deadline d);
  IpcRingCounters* c_ = nullptr;
  std::byte* data_ = nullptr;
  uint32_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t event_ = nullptr;
};

// Owns one end: the header mapping, the three descriptors, the device rings (the origin's
// allocation or the relay's IPC mapping), and a copy stream and event per direction (an end may
// write one ring and read the other from two threads).
class IpcPipe {
 public:
  IpcPipe() = default;
  IpcPipe(IpcPipe&& o) noexcept;
  IpcPipe& operator=(IpcPipe&& o) noexcept;
  ~IpcPipe();

  // Origin side, on the current device: two rings of `ringBytes` (rounded up to a power of two,
  // 64 KiB..1 GiB) in device memory, exported. kUnsupported without a device.
  static Result<IpcPipe> create(size_t ringBytes);
  // Relay side: checks the header (before any CUDA call: a bad one is kProtocol), then opens the
  // origin's memory on the current device.
  static Result<IpcPipe> attach(UniqueFd mem, UniqueFd originWake, UniqueFd relayWake);
  // The header checks of attach() alone (for tests): magic, ring size, mapping size.
  static Status checkHeader(uint32_t magic, uint32_t ringBytes, size_t bytes);

  IpcPipeShared* shared() const noexcept { return shared_; }
  IpcRing up() const noexcept;    // origin writes, relay reads
  IpcRing down() const noexcept;  // relay writes, origin reads
  int memFd() const noexcept { return mem_.get(); }
  int originWakeFd() const noexcept { return originWake_.get(); }
  int relayWakeFd() const noexcept { return relayWake_.get(); }
  void wakeOrigin() const noexcept;
  void wakeRelay() const noexcept;
  static void drainWake(int fd) noexcept;
  // Relay side: marks the pipe broken (the origin's waits then fail with a link failure).
  void markBroken(IpcPipeBreak why) noexcept;

  // Whole transfers with a deadline, for either end: `self` is this end's wake-up eventfd,
  // `ctrlFd` (the control socket to the other end, or -1) ends the wait when the other end goes
  // away. A broken pipe is a link failure (failover migrates again); a read first takes the bytes
  // written before the other end went away.
  Status writeAll(const IpcRing& ring, const void* src, size_t n, int self, int ctrlFd, Deadline d);
  Status readAll(const IpcRing& ring, void* dst, size_t n, int self, int ctrlFd, Deadline d);

 private:
  Status waitWake(int self, int ctrlFd, Deadline d);
  void wakeOther(int self) const noexcept;
  void unmap() noexcept;

  UniqueFd mem_;
  UniqueFd originWake_;
  UniqueFd relayWake_;
  IpcPipeShared* shared_ = nullptr;
  size_t mapBytes_ = 0;
  DeviceBuffer owned_;  // origin: the rings
  IpcMapping opened_;   // relay: the origin's rings, mapped here
  std::byte* rings_ = nullptr;
  Stream upStream_, downStream_;
  Event upEvent_, downEvent_;
};

}  // namespace reccl::cuda
