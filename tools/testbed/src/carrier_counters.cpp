#include "reccl/testbed/carrier_counters.h"

#include <fcntl.h>
#include <net/if.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "reccl/netlink/link.h"
#include "reccl/netlink/netns_guard.h"
#include "reccl/netlink/nl_socket.h"

namespace reccl::testbed {
namespace {

// sysfs shows the network devices of the namespace that was current when the instance was
// created; a detached mount keeps that view without touching the caller's mount namespace.
Result<UniqueFd> sysfsOfNetns(const std::string& netns) {
  RECCL_ASSIGN_OR_RETURN(auto guard, netlink::NetnsGuard::enter(netns));
  UniqueFd ctx(::fsopen("sysfs", FSOPEN_CLOEXEC));
  if (!ctx.valid()) {
    const int err = errno;
    Status s = Status::FromErrno(err, "fsopen sysfs for netns '" + netns + "'");
    return err == ENOSYS ? Status{Errc::kUnsupported, s.message()} : s;
  }
  if (::fsconfig(ctx.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    return Status::FromErrno(errno, "create sysfs for netns '" + netns + "'");
  UniqueFd mnt(::fsmount(ctx.get(), FSMOUNT_CLOEXEC,
                         MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC));
  if (!mnt.valid()) return Status::FromErrno(errno, "fsmount sysfs for netns '" + netns + "'");
  return mnt;
}

}  // namespace

Result<CarrierCounters> CarrierCounters::open(const std::string& netns, const std::string& dev) {
  if (dev.empty() || dev.size() >= IFNAMSIZ || dev.find('/') != std::string::npos || dev == "." ||
      dev == "..")
    return Status{Errc::kInvalidArgument, "not a device name: '" + dev + "'"};
  RECCL_ASSIGN_OR_RETURN(UniqueFd sysfs, sysfsOfNetns(netns));
  CarrierCounters c;
  for (auto [name, fd] : {std::pair{"carrier_up_count", &c.up_}, std::pair{"carrier_down_count", &c.down_}}) {
    const std::string path = "class/net/" + dev + "/" + name;
    fd->reset(::openat(sysfs.get(), path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd->valid()) {
      const int err = errno;
      Status s = Status::FromErrno(err, "open " + path + " in netns '" + netns + "'");
      return err == ENOENT ? Status{Errc::kNotFound, s.message()} : s;
    }
  }
  RECCL_ASSIGN_OR_RETURN(auto nl, netlink::NlSocket::openInNetns(netns));
  // The baseline: counts that did not move across the rtnetlink read belong to its carrier.
  for (int attempt = 0; attempt < 100; ++attempt) {
    RECCL_ASSIGN_OR_RETURN(int64_t up0, c.read(c.up_.get()));
    RECCL_ASSIGN_OR_RETURN(int64_t down0, c.read(c.down_.get()));
    RECCL_ASSIGN_OR_RETURN(netlink::LinkInfo link, netlink::getLink(nl, dev));
    RECCL_ASSIGN_OR_RETURN(int64_t up1, c.read(c.up_.get()));
    RECCL_ASSIGN_OR_RETURN(int64_t down1, c.read(c.down_.get()));
    if (up0 != up1 || down0 != down1) continue;
    c.upSeen_ = up1;
    c.downSeen_ = down1;
    c.diffWhenOn_ = up1 - down1 + (link.carrier ? 0 : 1);
    return c;
  }
  return Status{Errc::kTimeout, "carrier of " + netns + "/" + dev + " kept changing while read"};
}

Result<int64_t> CarrierCounters::read(int fd) const {
  char buf[32];
  // sysfs renders the attribute afresh for a read at offset 0.
  ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return Status::FromErrno(n < 0 ? errno : EIO, "read carrier count");
  buf[n] = '\0';
  char* end = nullptr;
  long long v = std::strtoll(buf, &end, 10);
  if (end == buf) return Status{Errc::kSystem, "carrier count is not a number"};
  return static_cast<int64_t>(v);
}

Result<bool> CarrierCounters::on() {
  RECCL_ASSIGN_OR_RETURN(upSeen_, read(up_.get()));
  RECCL_ASSIGN_OR_RETURN(downSeen_, read(down_.get()));
  return upSeen_ - downSeen_ == diffWhenOn_;
}

Result<bool> CarrierCounters::onCached() {
  const bool wasOn = upSeen_ - downSeen_ == diffWhenOn_;
  RECCL_ASSIGN_OR_RETURN(int64_t moved, read(wasOn ? down_.get() : up_.get()));
  if (moved == (wasOn ? downSeen_ : upSeen_)) return wasOn;
  return on();
}

}  // namespace reccl::testbed
