// The memory of one side of a directed connection: a control block (counters and doorbells)
// followed by S slots of [64-byte step header | chunk payload]. Local anonymous memory for TCP
// paths; a shared mapping (both processes see the same block) for shared-memory paths.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "channel/doorbell.h"
#include "channel/step_header.h"
#include "reccl/common/status.h"

namespace reccl::channel {

// Lives at offset 0 of the connection memory; may be shared between processes.
struct ConnCounters {
  uint32_t magic;  // kConnMagic once initialized by the creator
  uint32_t slots;
  uint64_t chunkBytes;
  // Steps the sender has posted into the slots (tcp receiver side: steps fully received).
  alignas(64) std::atomic<uint64_t> posted;
  // Steps the receiver has applied (tcp sender side: latest acknowledgement received).
  alignas(64) std::atomic<uint64_t> consumed;
  alignas(64) Doorbell toReceiver;  // rung after `posted` advances
  alignas(64) Doorbell toSender;    // rung after `consumed` advances
  alignas(64) std::atomic<uint32_t> closed;  // set by either side on teardown or failure
};
inline constexpr uint32_t kConnMagic = 0x4e4e4352;  // "RCNN"
inline constexpr size_t kControlBytes = 4096;
static_assert(sizeof(ConnCounters) <= kControlBytes);

inline size_t slotStride(size_t chunkBytes) { return kStepHeaderBytes + ((chunkBytes + 63) & ~size_t{63}); }
inline size_t connMemoryBytes(uint32_t slots, size_t chunkBytes) {
  return kControlBytes + slots * slotStride(chunkBytes);
}

// Owns one mapping (munmap on destruction).
class ConnMemory {
 public:
  ConnMemory() = default;
  ConnMemory(void* base, size_t bytes) : base_(static_cast<std::byte*>(base)), bytes_(bytes) {}
  ConnMemory(ConnMemory&& o) noexcept;
  ConnMemory& operator=(ConnMemory&& o) noexcept;
  ~ConnMemory();

  // Anonymous private memory with initialized counters (pages are touched lazily).
  static Result<ConnMemory> anonymous(uint32_t slots, size_t chunkBytes);
  // Initializes the control block of a fresh mapping (creator side of shared memory).
  void initialize(uint32_t slots, size_t chunkBytes) noexcept;
  // Checks the control block of a mapping someone else initialized.
  Status validate(uint32_t slots, size_t chunkBytes) const;

  ConnCounters* counters() const noexcept { return reinterpret_cast<ConnCounters*>(base_); }
  uint32_t slots() const noexcept { return counters()->slots; }
  size_t chunkBytes() const noexcept { return counters()->chunkBytes; }
  // Header + payload of the slot that holds 1-based `step`.
  std::byte* slotFrame(uint64_t step) const noexcept {
    return base_ + kControlBytes + ((step - 1) % slots()) * slotStride(chunkBytes());
  }
  std::byte* slotPayload(uint64_t step) const noexcept { return slotFrame(step) + kStepHeaderBytes; }
  bool valid() const noexcept { return base_ != nullptr; }

 private:
  std::byte* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace reccl::channel
