#include "reccl/netlink/tap.h"

#include <fcntl.h>
#include <net/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "reccl/netlink/netns_guard.h"

namespace reccl::netlink {

namespace {

// /dev/net/tun binds a new device to the namespace of the opener, so the open happens inside.
Result<UniqueFd> openTun(std::string_view netns, std::string_view name, bool nonblocking,
                         const char* what) {
  if (name.empty() || name.size() >= IFNAMSIZ) {
    return Status{Errc::kInvalidArgument, "tap name '" + std::string(name) + "' must be 1-15 characters"};
  }
  UniqueFd fd;
  {
    auto guard = NetnsGuard::enter(netns);
    if (!guard.ok()) return guard.status().Wrap(what);
    int flags = O_RDWR | O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0);
    fd.reset(::open("/dev/net/tun", flags));
    if (!fd.valid()) return Status::FromErrno(errno, std::string(what) + ": open /dev/net/tun");
  }
  return fd;
}

// With the vnet header: the kernel keeps a device's flags when a queue attaches while another
// is attached, but takes the attaching call's flags on a tap that has no queue left, so every
// call asks for what createTap made.
Status setIff(int fd, std::string_view name, const std::string& what) {
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, name.data(), name.size());
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE | IFF_VNET_HDR;
  if (::ioctl(fd, TUNSETIFF, &ifr) != 0) return Status::FromErrno(errno, what + ": TUNSETIFF");
  return Status::Ok();
}

}  // namespace

Result<UniqueFd> createTap(std::string_view netns, std::string_view name, bool nonblocking) {
  const std::string what = "create tap " + std::string(name);
  RECCL_ASSIGN_OR_RETURN(UniqueFd fd, openTun(netns, name, nonblocking, what.c_str()));
  // TUNSETIFF would silently attach to an existing device of that name; refuse reuse instead.
  {
    auto guard = NetnsGuard::enter(netns);
    if (!guard.ok()) return guard.status().Wrap(what);
    if (::if_nametoindex(std::string(name).c_str()) != 0) {
      return Status{Errc::kExists, what + ": a device of that name exists"};
    }
  }
  RECCL_TRY(setIff(fd.get(), name, what));
  // Checksum and TCP segmentation offload, as a physical NIC has: the stack hands the queue
  // segments of up to 64 KiB with a partial checksum (described in the vnet header), and frames
  // written in that form are taken as such, so whoever copies frames between two such taps moves
  // a segment per read instead of an MTU's worth.
  if (::ioctl(fd.get(), TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) != 0)
    return Status::FromErrno(errno, what + ": TUNSETOFFLOAD");
  // Last: a tap that failed a step above goes with its fd instead of persisting half made.
  if (::ioctl(fd.get(), TUNSETPERSIST, 1) != 0) return Status::FromErrno(errno, what + ": TUNSETPERSIST");
  return fd;
}

Result<UniqueFd> attachTapQueue(std::string_view netns, std::string_view name, bool nonblocking) {
  const std::string what = "attach queue to tap " + std::string(name);
  RECCL_ASSIGN_OR_RETURN(UniqueFd fd, openTun(netns, name, nonblocking, what.c_str()));
  // TUNSETIFF on a missing name would create a new tap instead of attaching.
  {
    auto guard = NetnsGuard::enter(netns);
    if (!guard.ok()) return guard.status().Wrap(what);
    if (::if_nametoindex(std::string(name).c_str()) == 0) {
      return Status{Errc::kNotFound, what + ": no such device"};
    }
  }
  RECCL_TRY(setIff(fd.get(), name, what));
  return fd;
}

Status setTapCarrier(int queueFd, bool on) {
  int v = on ? 1 : 0;
  if (::ioctl(queueFd, TUNSETCARRIER, &v) != 0) {
    return Status::FromErrno(errno, on ? "TUNSETCARRIER on" : "TUNSETCARRIER off");
  }
  return Status::Ok();
}

Result<UniqueFd> holdTapQueue(std::string_view netns, std::string_view name) {
  RECCL_ASSIGN_OR_RETURN(UniqueFd q, attachTapQueue(netns, name));
  // While attached, the queue takes its share of the device's transmit flows (unless a steering
  // program picks the queues, as the testbed's does) and nobody reads them; disable it at once
  // so no frame is stranded there. The carrier ioctl still works on a disabled queue on current
  // kernels.
  ifreq ifr{};
  ifr.ifr_flags = IFF_DETACH_QUEUE;
  if (::ioctl(q.get(), TUNSETQUEUE, &ifr) != 0)
    return Status::FromErrno(errno, "disable the held queue of tap " + std::string(name));
  return q;
}

Status setTapCarrier(std::string_view netns, std::string_view name, bool on) {
  const std::string what = "tap " + std::string(name);
  RECCL_ASSIGN_OR_RETURN(UniqueFd q, attachTapQueue(netns, name));
  // Disabled at once, as holdTapQueue's; where the carrier ioctl fails on a disabled queue,
  // re-enabled for the ioctl.
  ifreq ifr{};
  ifr.ifr_flags = IFF_DETACH_QUEUE;
  const bool detached = ::ioctl(q.get(), TUNSETQUEUE, &ifr) == 0;
  Status s = setTapCarrier(q.get(), on);
  if (!s.ok() && detached) {
    ifr.ifr_flags = IFF_ATTACH_QUEUE;
    if (::ioctl(q.get(), TUNSETQUEUE, &ifr) == 0) s = setTapCarrier(q.get(), on);
  }
  return s.Wrap(what);
}

}  // namespace reccl::netlink
