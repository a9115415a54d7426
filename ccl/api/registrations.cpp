#include "api/registrations.h"

#include <atomic>
#include <string>

namespace reccl::api {
namespace {

// Odd values from a high start: a handle is never NULL, never a small integer a caller might
// pass by mistake, and never an aligned pointer a caller might confuse with one.
uintptr_t nextHandle() {
  static std::atomic<uintptr_t> next{0x5e61'0001};
  return next.fetch_add(2, std::memory_order_relaxed);
}

}  // namespace

Status Registrations::checkRange(const void* buff, size_t size) {
  if (!buff) return Status(Errc::kInvalidArgument, "buff: null pointer");
  if (size == 0) return Status(Errc::kInvalidArgument, "size: 0 bytes");
  const auto begin = reinterpret_cast<uintptr_t>(buff);
  if (size > UINTPTR_MAX - begin)
    return Status(Errc::kInvalidArgument, "size: " + std::to_string(size) + " bytes from buff run past the address space");
  return Status::Ok();
}

Status Registrations::checkRoomLocked() const {
  if (live_.size() >= kMaxLive)
    return Status(Errc::kInvalidUsage, "comm: holds " + std::to_string(kMaxLive) + " registrations already (deregister some first)");
  return Status::Ok();
}

Status Registrations::checkRoom() {
  std::lock_guard lk(mu_);
  return checkRoomLocked();
}

Result<void*> Registrations::add(const void* buff, size_t size) {
  RECCL_TRY(checkRange(buff, size));
  std::lock_guard lk(mu_);
  RECCL_TRY(checkRoomLocked());
  const uintptr_t h = nextHandle();
  live_.emplace(h, made_++);
  return reinterpret_cast<void*>(h);
}

Status Registrations::unknown() const {
  return Status(Errc::kInvalidArgument, std::string(arg_) +
                                            ": no live registration of this communicator (deregistered already, or made on another one)");
}

Result<uint64_t> Registrations::ordinal(void* handle) {
  if (!handle) return Status(Errc::kInvalidArgument, std::string(arg_) + ": null");
  std::lock_guard lk(mu_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(handle));
  if (it == live_.end()) return unknown();
  return it->second;
}

Status Registrations::remove(void* handle) {
  if (!handle) return Status(Errc::kInvalidArgument, std::string(arg_) + ": null");
  std::lock_guard lk(mu_);
  if (live_.erase(reinterpret_cast<uintptr_t>(handle)) == 0) return unknown();
  return Status::Ok();
}

void Registrations::clear() {
  std::lock_guard lk(mu_);
  live_.clear();
}

}  // namespace reccl::api
