// The buffers a communicator's handle has registered (recclCommRegister). No transport needs a
// registration to move a buffer (TCP moves large steps straight from and into it and copies the
// rest through its slots; verbs and the CUDA path stage through slots registered when a connection
// is made), so the table only keeps which handles are live: a deregister of a handle that is not
// is refused by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_set>

#include "reccl/common/status.h"

namespace reccl::api {

class Registrations {
 public:
  // Live registrations one communicator may hold at once (NCCL's limit is memory; this keeps a
  // loop that never deregisters from growing without bound).
  static constexpr size_t kMaxLive = 1u << 16;

  // A new registration of [buff, buff + size); its handle. Handles come from one count for the
  // whole process and are never handed out twice, so a stale handle, or another communicator's,
  // never names a registration here.
  Result<void*> add(const void* buff, size_t size);
  Status remove(void* handle);
  // The communicator goes: its registrations with it.
  void clear();

 private:
  std::mutex mu_;
  std::unordered_set<uintptr_t> live_;
};

}  // namespace reccl::api
