// The buffers a communicator's handle has registered (recclCommRegister). No transport needs a
// registration to move a buffer (TCP moves large steps straight from and into it and copies the
// rest through its slots; verbs and the CUDA path stage through slots registered when a connection
// is made), so the table only keeps which handles are live: a deregister of a handle that is not
// is refused by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "reccl/common/status.h"

namespace reccl::api {

class Registrations {
 public:
  // `arg`: how the C API names a handle of this table in its errors ("handle", "win").
  explicit Registrations(const char* arg = "handle") : arg_(arg) {}

  // Live registrations one communicator may hold at once (NCCL's limit is memory; this keeps a
  // loop that never deregisters from growing without bound).
  static constexpr size_t kMaxLive = 1u << 16;

  // Whether add(buff, size) would be refused for its arguments, or for want of room, and why.
  static Status checkRange(const void* buff, size_t size);
  Status checkRoom();
  // A new registration of [buff, buff + size); its handle. Handles come from one count for the
  // whole process and are never handed out twice, so a stale handle, or another communicator's,
  // never names a registration here.
  Result<void*> add(const void* buff, size_t size);
  // Which of this table's registrations `handle` is, counted from 0 in the order they were made
  // (the ranks' windows agree on it: api/windows.cpp).
  Result<uint64_t> ordinal(void* handle);
  Status remove(void* handle);
  // The communicator goes: its registrations with it.
  void clear();

 private:
  Status checkRoomLocked() const;
  Status unknown() const;

  const char* arg_;
  std::mutex mu_;
  std::unordered_map<uintptr_t, uint64_t> live_;  // handle -> ordinal
  uint64_t made_ = 0;
};

}  // namespace reccl::api
