#include "reccl/detector/netns.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <cerrno>
#include <thread>

namespace reccl::detector {

namespace {
// The checks every namespace descriptor passes, however it was obtained: a regular file on nsfs
// (what /proc/PID/ns/net and the bind mounts under /run/netns are) of type CLONE_NEWNET.
Status checkNetnsFd(int fd, const std::string& what) {
  struct statfs fs {};
  if (fstatfs(fd, &fs) != 0) return Status::FromErrno(errno, "netns: fstatfs " + what);
  if (fs.f_type != NSFS_MAGIC)
    return Status(Errc::kInvalidArgument, "netns: '" + what + "' is not a namespace file (not on nsfs)");
  int type = ioctl(fd, NS_GET_NSTYPE);
  if (type < 0) return Status::FromErrno(errno, "netns: NS_GET_NSTYPE " + what);
  if (type != CLONE_NEWNET)
    return Status(Errc::kInvalidArgument, "netns: '" + what + "' is not a network namespace");
  return Status::Ok();
}

Status fillIno(Netns& ns, const std::string& what) {
  struct stat st {};
  if (fstat(ns.fd.get(), &st) != 0) return Status::FromErrno(errno, "netns: fstat " + what);
  ns.ino = static_cast<uint32_t>(st.st_ino);
  // Our own namespace named by path or descriptor: treated as own, so no privilege is needed.
  auto own = ownNetnsIno();
  if (own.ok() && own.value() == ns.ino) ns.fd.reset();
  return Status::Ok();
}
}  // namespace

Result<uint32_t> ownNetnsIno() {
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) != 0) return Status::FromErrno(errno, "stat /proc/self/ns/net");
  return static_cast<uint32_t>(st.st_ino);
}

namespace {
std::string netnsPath(std::string_view spec) {
  if (spec.empty()) return "/proc/self/ns/net";
  if (spec.find('/') != std::string_view::npos) return std::string(spec);
  return "/run/netns/" + std::string(spec);
}

Result<UniqueFd> openChecked(const std::string& spec, const std::string& path) {
  if (spec == "." || spec == "..") return Status(Errc::kInvalidArgument, "netns: bad namespace name '" + spec + "'");
  // O_PATH opens nothing: a FIFO, socket or device at the path is not opened (no blocking
  // open, no driver's open handler), only named.
  UniqueFd where(open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!where) {
    int err = errno;
    if (err == ENOENT) return Status(Errc::kNotFound, "netns: no network namespace '" + spec + "' (" + path + ")");
    return Status::FromErrno(err, "netns: open " + path);
  }
  struct stat st {};
  if (fstat(where.get(), &st) != 0) return Status::FromErrno(errno, "netns: fstat " + path);
  if (!S_ISREG(st.st_mode)) return Status(Errc::kInvalidArgument, "netns: '" + path + "' is not a namespace file");
  struct statfs fs {};
  if (fstatfs(where.get(), &fs) != 0) return Status::FromErrno(errno, "netns: fstatfs " + path);
  if (fs.f_type != NSFS_MAGIC)
    return Status(Errc::kInvalidArgument, "netns: '" + path + "' is not a namespace file (not on nsfs)");
  // Reopened through the descriptor, not the path: what was checked is what gets opened.
  std::string self = "/proc/self/fd/" + std::to_string(where.get());
  UniqueFd fd(open(self.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd) return Status::FromErrno(errno, "netns: open " + path);
  RECCL_TRY(checkNetnsFd(fd.get(), path));
  return fd;
}
}  // namespace

Result<UniqueFd> openNetnsFd(std::string_view spec) { return openChecked(std::string(spec), netnsPath(spec)); }

Result<Netns> openNetns(std::string_view spec) {
  Netns ns;
  ns.spec = std::string(spec);
  ns.path = netnsPath(spec);
  if (spec.empty()) {
    RECCL_ASSIGN_OR_RETURN(ns.ino, ownNetnsIno());
    return ns;
  }
  RECCL_ASSIGN_OR_RETURN(ns.fd, openChecked(ns.spec, ns.path));
  RECCL_TRY(fillIno(ns, ns.path));
  return ns;
}

Result<Netns> netnsFromFd(UniqueFd fd, std::string label) {
  if (!fd) return Status(Errc::kInvalidArgument, "netns: no namespace descriptor");
  int fl = fcntl(fd.get(), F_GETFL);
  if (fl < 0) return Status::FromErrno(errno, "netns: fcntl");
  // An O_PATH descriptor proves only that its sender could name the file, not open it.
  if (fl & O_PATH)
    return Status(Errc::kInvalidArgument, "netns: namespace descriptor is O_PATH (open it for reading)");
  Netns ns;
  ns.spec = std::move(label);
  ns.fd = std::move(fd);
  RECCL_TRY(checkNetnsFd(ns.fd.get(), ns.spec.empty() ? "descriptor" : ns.spec));
  RECCL_TRY(fillIno(ns, ns.spec));
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
