// Moves the calling thread into a network namespace and back when it goes out of scope.
// setns(CLONE_NEWNET) is per thread, so other threads of the process are not affected; a thread
// started while the guard is active starts in the entered namespace (clone copies the creating
// thread's namespaces).
#pragma once

#include <string_view>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::netlink {

class NetnsGuard {
 public:
  // Enters /run/netns/NAME. An empty name enters nothing (the guard is a no-op).
  static Result<NetnsGuard> enter(std::string_view name);
  // Enters the namespace the fd refers to.
  static Result<NetnsGuard> enterFd(int netnsFd);

  NetnsGuard(NetnsGuard&&) noexcept = default;
  NetnsGuard& operator=(NetnsGuard&&) = delete;
  NetnsGuard(const NetnsGuard&) = delete;
  NetnsGuard& operator=(const NetnsGuard&) = delete;
  // Restores the namespace the thread was in; logs (never throws) when that fails.
  ~NetnsGuard();

 private:
  NetnsGuard() = default;
  UniqueFd saved_;  // the thread's namespace before enter(); invalid for the no-op guard
};

}  // namespace reccl::netlink
