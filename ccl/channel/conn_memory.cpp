#include "channel/conn_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <new>
#include <utility>

namespace reccl::channel {

ConnMemory::ConnMemory(ConnMemory&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

ConnMemory& ConnMemory::operator=(ConnMemory&& o) noexcept {
  if (this != &o) {
    if (base_) munmap(base_, bytes_);
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

ConnMemory::~ConnMemory() {
  if (base_) munmap(base_, bytes_);
}

Result<ConnMemory> ConnMemory::anonymous(uint32_t slots, size_t chunkBytes) {
  size_t bytes = connMemoryBytes(slots, chunkBytes);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return Status::FromErrno(errno, "mmap connection slots");
  ConnMemory m(p, bytes);
  m.initialize(slots, chunkBytes);
  return m;
}

void ConnMemory::initialize(uint32_t slots, size_t chunkBytes) noexcept {
  auto* c = new (base_) ConnCounters{};
  c->slots = slots;
  c->chunkBytes = chunkBytes;
  c->posted.store(0);
  c->consumed.store(0);
  c->closed.store(0);
  std::atomic_thread_fence(std::memory_order_release);
  c->magic = kConnMagic;
}

Status ConnMemory::validate(uint32_t slots, size_t chunkBytes) const {
  const ConnCounters* c = counters();
  if (c->magic != kConnMagic) return Status(Errc::kProtocol, "shared ring: not initialized");
  if (c->slots != slots || c->chunkBytes != chunkBytes)
    return Status(Errc::kProtocol, "shared ring: geometry mismatch");
  return Status::Ok();
}

}  // namespace reccl::channel
