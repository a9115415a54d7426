#include "reccl/inject/lab_cable.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <string>
#include <thread>

#include "reccl/common/unique_fd.h"
#include "reccl/inject/link_control.h"
#include "reccl/netlink/link.h"

namespace reccl::inject {

namespace {

// The name of the kernel driver bound to a root-namespace device; "" for a virtual device.
std::string driverOf(const std::string& dev) {
  std::string link = "/sys/class/net/" + dev + "/device/driver";
  char buf[PATH_MAX];
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return {};
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(path.rfind('/') + 1);
}

// The carrier as the kernel holds it. sysfs reads it without a lock, so the read is not held
// up behind the carrier change's own work under RTNL as RTM_GETLINK is; an admin-down device
// has no sysfs carrier (EINVAL), rtnetlink still reports it.
Result<bool> carrierOf(netlink::NlSocket& nl, const std::string& dev) {
  UniqueFd fd(::open(("/sys/class/net/" + dev + "/carrier").c_str(), O_RDONLY | O_CLOEXEC));
  char c = 0;
  if (fd && ::read(fd.get(), &c, 1) == 1 && (c == '0' || c == '1')) return c == '1';
  RECCL_ASSIGN_OR_RETURN(netlink::LinkInfo info, netlink::getLink(nl, dev));
  return info.carrier;
}

}  // namespace

Result<CarrierControl> carrierControlFor(const ResolvedTarget& t, bool inLab, std::string_view driver) {
  if (isTapKind(t.kind)) return CarrierControl::kTap;
  if (inLab && t.netns.empty() && driver == "virtio_net") return CarrierControl::kLabCable;
  std::string what = !t.kind.empty() ? "a " + t.kind
                     : !driver.empty() ? "a " + std::string(driver) + " nic"
                                       : std::string("a device of unknown kind");
  if (!inLab)
    return Status{Errc::kInvalidArgument,
                  "carrier-off/on need a tap nic (or, inside the qemu lab with RECCL_TEST_LAB=1, a lab "
                  "VM's virtio nic); " + t.toString() + " is " + what + " (use link-down/link-up)"};
  return Status{Errc::kInvalidArgument,
                "carrier-off/on need a tap nic or a virtio nic in the lab VM's root namespace; " +
                    t.toString() + " is " + what + " (use link-down/link-up)"};
}

Result<CarrierControl> carrierControl(const ResolvedTarget& t) {
  const bool inLab = std::getenv("RECCL_TEST_LAB") != nullptr;
  const bool readDriver = inLab && t.netns.empty() && !isTapKind(t.kind);
  return carrierControlFor(t, inLab, readDriver ? driverOf(t.dev) : std::string());
}

Status setLabCable(const ResolvedTarget& t, bool on, int64_t waitMs) {
  RECCL_ASSIGN_OR_RETURN(auto nl, netlink::NlSocket::openInNetns(t.netns));
  {
    RECCL_ASSIGN_OR_RETURN(bool carrier, carrierOf(nl, t.dev));
    if (carrier == on) return {};  // a restore of a cable already as it was: no request
  }
  // The guest's console is where the runner reads requests; one write() keeps the line whole
  // among other writers of the console.
  UniqueFd console(::open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC));
  if (!console) return Status::FromErrno(errno, "lab cable " + t.dev + ": open /dev/console");
  const std::string line = "\n@@lab-monitor set_link " + t.dev + (on ? " on\n" : " off\n");
  ssize_t n = ::write(console.get(), line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size()))
    return Status::FromErrno(n < 0 ? errno : EIO, "lab cable " + t.dev + ": write /dev/console");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
  for (;;) {
    RECCL_ASSIGN_OR_RETURN(bool carrier, carrierOf(nl, t.dev));
    if (carrier == on) return {};
    if (std::chrono::steady_clock::now() >= deadline)
      return {Errc::kTimeout, "lab cable " + t.toString() + ": the carrier did not go " + (on ? "up" : "down") +
                                  " within " + std::to_string(waitMs) + " ms of the set_link request (is " +
                                  "tools/lab/lab.sh serving this VM's console?)"};
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace reccl::inject
