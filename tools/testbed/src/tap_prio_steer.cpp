#include "reccl/testbed/tap_prio_steer.h"

#include <bpf/libbpf.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <memory>

#include "tap_prio_steer.skel.h"

namespace reccl::testbed {
namespace {

struct SkelDeleter {
  void operator()(tap_prio_steer* s) const noexcept { tap_prio_steer__destroy(s); }
};

}  // namespace

Status steerTapsByPriority(const std::vector<int>& queueFds) {
  if (queueFds.empty()) return Status::Ok();
  std::unique_ptr<tap_prio_steer, SkelDeleter> skel(tap_prio_steer__open_and_load());
  if (!skel) return Status::FromErrno(errno, "load the tap priority steering program (tap mode needs bpf() and a socket filter program)");
  int prog = bpf_program__fd(skel->progs.tap_prio_steer);
  for (int fd : queueFds) {
    if (::ioctl(fd, TUNSETSTEERINGEBPF, &prog) != 0)
      return Status::FromErrno(errno, "TUNSETSTEERINGEBPF on a tap queue");
  }
  return Status::Ok();
}

}  // namespace reccl::testbed
