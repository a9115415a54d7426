#include "reccl/netlink/netns_guard.h"

#include <fcntl.h>
#include <sched.h>

#include <cerrno>
#include <cstring>

#include "reccl/common/log.h"
#include "reccl/netlink/netns.h"

namespace reccl::netlink {

Result<NetnsGuard> NetnsGuard::enter(std::string_view name) {
  if (name.empty()) return NetnsGuard();
  RECCL_ASSIGN_OR_RETURN(UniqueFd fd, openNetns(name));
  return enterFd(fd.get());
}

Result<NetnsGuard> NetnsGuard::enterFd(int netnsFd) {
  int self = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (self < 0) return Status::FromErrno(errno, "open /proc/thread-self/ns/net");
  NetnsGuard g;
  g.saved_.reset(self);
  if (::setns(netnsFd, CLONE_NEWNET) != 0) {
    Status s = Status::FromErrno(errno, "setns(CLONE_NEWNET)");
    g.saved_.reset();
    return s;
  }
  return g;
}

NetnsGuard::~NetnsGuard() {
  if (!saved_.valid()) return;
  if (::setns(saved_.get(), CLONE_NEWNET) != 0) {
    RECCL_WARN(kLogTestbed, "restore netns of thread failed: %s", std::strerror(errno));
  }
}

}  // namespace reccl::netlink
