// One end of a connection registered on every rail's protection domain, once, when the
// connection is made: its slot ring and (sender) its ack word. A path on any rail then finds its
// keys here, so moving a connection to another rail (a migration, a fail-back) registers nothing.
//
// Only the slots are registered, never the control block before them: a peer's RDMA write can
// reach the step frames, not the counters and futex words.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "channel/conn_memory.h"
#include "reccl/common/status.h"
#include "transport/verbs/conn_info.h"
#include "transport/verbs/rail_device.h"
#include "transport/verbs/verbs_handle.h"

namespace reccl::transport::verbs {

class ConnRegistration {
 public:
  // Registers the slots of `mem` on each of `rails` (remote-writable for a receiver) and, for a
  // sender, a 64-byte ack word the receiver writes (AckMode::kWrite) or aims its empty
  // acknowledgement writes at (AckMode::kImm). `mem` must outlive the registration.
  static Result<std::unique_ptr<ConnRegistration>> create(std::span<RailDevice* const> rails,
                                                          const channel::ConnMemory& mem, ConnRole role);
  ConnRegistration(const ConnRegistration&) = delete;
  ConnRegistration& operator=(const ConnRegistration&) = delete;
  ~ConnRegistration();

  ConnRole role() const noexcept { return role_; }
  const channel::ConnMemory& memory() const noexcept { return *mem_; }
  // The first slot's address and the ring's length.
  uint64_t slotAddr() const noexcept { return reinterpret_cast<uint64_t>(mem_->slotFrame(1)); }
  size_t slotBytes() const noexcept;
  // Keys on `rail` (kNotFound: not registered there).
  Result<uint32_t> slotLkey(int rail) const;
  Result<uint32_t> slotRkey(int rail) const;
  uint64_t ackAddr() const noexcept { return reinterpret_cast<uint64_t>(ack_.get()); }
  Result<uint32_t> ackRkey(int rail) const;
  // The word a receiver in AckMode::kWrite writes its applied step into (sender only).
  const std::atomic<uint64_t>* ackWord() const noexcept { return ack_.get(); }

  // What the peer needs on `rail`: the ring (receiver) or the ack word (sender).
  Result<ConnInfo> describe(int rail, uint32_t epoch) const;

  // Deregisters everything; the first failure is returned (the rest is still released).
  Status close();

 private:
  ConnRegistration() = default;
  struct PerRail {
    int rail = -1;
    MemoryRegion slots;
    MemoryRegion ack;
  };
  const PerRail* find(int rail) const noexcept;

  ConnRole role_ = ConnRole::kSender;
  const channel::ConnMemory* mem_ = nullptr;
  struct AlignedFree {
    void operator()(std::atomic<uint64_t>* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::atomic<uint64_t>, AlignedFree> ack_;
  std::vector<PerRail> rails_;
};

}  // namespace reccl::transport::verbs
