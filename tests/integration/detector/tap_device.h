// A tap device in a namespace, whose carrier the test sets with TUNSETCARRIER: the driver-side
// path of a physical NIC (ifindex == iflink), for which the kernel holds carrier events in its
// link-watch work up to a second. Removed when the fd closes (not persistent).
#pragma once

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include "reccl/common/unique_fd.h"
#include "reccl/detector/netns.h"

namespace reccl::detector::testing {

class TapDevice {
 public:
  // Creates `name` in the namespace named `netns` (under /run/netns); ok() tells.
  TapDevice(const std::string& netns, const std::string& name) {
    auto ns = openNetns(netns);
    if (!ns.ok()) return;
    int nsFd = ns->fd.get();
    // The device lands in the namespace of the thread that opens it: a short-lived thread
    // enters it, so the test's own thread stays where it was.
    std::thread([&] {
      if (setns(nsFd, CLONE_NEWNET) != 0) return;
      UniqueFd fd(open("/dev/net/tun", O_RDWR | O_CLOEXEC));
      if (fd.get() < 0) return;
      ifreq ifr{};
      ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
      std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
      if (ioctl(fd.get(), TUNSETIFF, &ifr) != 0) return;
      fd_ = std::move(fd);
    }).join();
  }
  bool ok() const { return fd_.get() >= 0; }
  bool setCarrier(bool on) {
    int v = on ? 1 : 0;
    return ioctl(fd_.get(), TUNSETCARRIER, &v) == 0;
  }

 private:
  UniqueFd fd_;
};

}  // namespace reccl::detector::testing
