#include "reccl/netlink/netns.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "reccl/common/log.h"

namespace reccl::netlink {

std::string netnsPath(std::string_view name) {
  std::string p = kNetnsRunDir;
  p += '/';
  p += name;
  return p;
}

namespace {

Status validName(std::string_view name) {
  if (name.empty() || name.size() > 200 || name.find('/') != std::string_view::npos ||
      name == "." || name == "..") {
    return {Errc::kInvalidArgument, "netns name '" + std::string(name) + "' is not valid"};
  }
  return Status::Ok();
}

// /run/netns must be a shared mount point, as iproute2 makes it, so that a namespace mount made
// here propagates into mount namespaces created later (e.g. by `ip netns exec`) and its removal
// propagates too.
Status prepareRunDir() {
  if (::mkdir(kNetnsRunDir, 0755) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "mkdir /run/netns");
  }
  if (::mount("", kNetnsRunDir, "none", MS_SHARED | MS_REC, nullptr) == 0) return Status::Ok();
  if (errno != EINVAL) return Status::FromErrno(errno, "make /run/netns shared");
  // Not a mount point yet: bind it onto itself first.
  if (::mount(kNetnsRunDir, kNetnsRunDir, "none", MS_BIND | MS_REC, nullptr) != 0) {
    return Status::FromErrno(errno, "bind mount /run/netns");
  }
  if (::mount("", kNetnsRunDir, "none", MS_SHARED | MS_REC, nullptr) != 0) {
    return Status::FromErrno(errno, "make /run/netns shared");
  }
  return Status::Ok();
}

}  // namespace

Status createNetns(std::string_view name) {
  RECCL_TRY(validName(name));
  RECCL_TRY(prepareRunDir());
  const std::string path = netnsPath(name);
  int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "create " + path);
  ::close(fd);

  // unshare() changes only the calling thread's namespace; a throwaway thread keeps the caller
  // where it is. The bind mount of the thread's ns file is what keeps the namespace alive.
  Status result;
  std::thread helper([&] {
    if (::unshare(CLONE_NEWNET) != 0) {
      result = Status::FromErrno(errno, "unshare(CLONE_NEWNET) for " + std::string(name));
      return;
    }
    if (::mount("/proc/thread-self/ns/net", path.c_str(), "none", MS_BIND, nullptr) != 0) {
      result = Status::FromErrno(errno, "bind mount netns at " + path);
    }
  });
  helper.join();
  if (!result.ok()) ::unlink(path.c_str());
  else RECCL_TRACE(kLogTestbed, "netns %.*s created", static_cast<int>(name.size()), name.data());
  return result;
}

Status deleteNetns(std::string_view name) {
  RECCL_TRY(validName(name));
  const std::string path = netnsPath(name);
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) return Status::FromErrno(errno, "netns " + path);
  // MNT_DETACH: a process still inside keeps the namespace alive, but the name is gone now.
  if (::umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL) {
    return Status::FromErrno(errno, "umount " + path);
  }
  if (::unlink(path.c_str()) != 0) return Status::FromErrno(errno, "unlink " + path);
  return Status::Ok();
}

bool netnsExists(std::string_view name) {
  if (!validName(name).ok()) return false;
  struct stat st{};
  return ::lstat(netnsPath(name).c_str(), &st) == 0;
}

std::vector<std::string> listNetns() {
  std::vector<std::string> names;
  DIR* dir = ::opendir(kNetnsRunDir);
  if (dir == nullptr) return names;
  while (dirent* e = ::readdir(dir)) {
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

Result<UniqueFd> openNetns(std::string_view name) {
  RECCL_TRY(validName(name));
  const std::string path = netnsPath(name);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open netns " + path);
  return UniqueFd(fd);
}

}  // namespace reccl::netlink
