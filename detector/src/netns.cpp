#include "reccl/detector/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <thread>

namespace reccl::detector {

Result<uint32_t> ownNetnsIno() {
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) != 0) return Status::FromErrno(errno, "stat /proc/self/ns/net");
  return static_cast<uint32_t>(st.st_ino);
}

Result<Netns> openNetns(std::string_view spec) {
  Netns ns;
  ns.spec = std::string(spec);
  if (spec.empty()) {
    RECCL_ASSIGN_OR_RETURN(ns.ino, ownNetnsIno());
    ns.path = "/proc/self/ns/net";
    return ns;
  }
  if (spec.find('/') != std::string_view::npos) {
    ns.path = std::string(spec);
  } else {
    if (spec == "." || spec == "..")
      return Status(Errc::kInvalidArgument, "netns: bad namespace name '" + std::string(spec) + "'");
    ns.path = "/run/netns/" + std::string(spec);
  }
  int fd = open(ns.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT)
      return Status(Errc::kNotFound, "netns: no network namespace '" + ns.spec + "' (" + ns.path + ")");
    return Status::FromErrno(err, "netns: open " + ns.path);
  }
  ns.fd.reset(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::FromErrno(errno, "netns: fstat " + ns.path);
  ns.ino = static_cast<uint32_t>(st.st_ino);
  // Our own namespace named by path: treat as own so no privilege is needed to use it.
  auto own = ownNetnsIno();
  if (own.ok() && own.value() == ns.ino) ns.fd.reset();
  return ns;
}

Result<UniqueFd> socketInNetns(int nsFd, int domain, int type, int protocol) {
  if (nsFd < 0) {
    int fd = ::socket(domain, type | SOCK_CLOEXEC, protocol);
    if (fd < 0) return Status::FromErrno(errno, "socket");
    return UniqueFd(fd);
  }
  int fd = -1;
  int err = 0;
  const char* step = "";
  std::thread t([&] {
    if (setns(nsFd, CLONE_NEWNET) != 0) {
      err = errno;
      step = "setns";
      return;
    }
    fd = ::socket(domain, type | SOCK_CLOEXEC, protocol);
    if (fd < 0) {
      err = errno;
      step = "socket in netns";
    }
  });
  t.join();
  if (fd < 0) return Status::FromErrno(err, step);
  return UniqueFd(fd);
}

}  // namespace reccl::detector
