#include "reccl/netlink/netns_sysctl.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "reccl/common/unique_fd.h"
#include "reccl/netlink/netns_guard.h"

namespace reccl::netlink {

namespace {
Result<std::string> sysctlPath(std::string_view key) {
  if (key.empty() || key.find("..") != std::string_view::npos || key.front() == '/') {
    return Status{Errc::kInvalidArgument, "sysctl key '" + std::string(key) + "'"};
  }
  return "/proc/sys/" + std::string(key);
}
}  // namespace

Status writeNetnsSysctl(std::string_view netns, std::string_view key, std::string_view value) {
  RECCL_ASSIGN_OR_RETURN(std::string path, sysctlPath(key));
  UniqueFd fd;
  {
    RECCL_ASSIGN_OR_RETURN(auto guard, NetnsGuard::enter(netns));
    fd.reset(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  }
  if (!fd.valid()) return Status::FromErrno(errno, "open " + path);
  if (::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return Status::FromErrno(errno, "write " + path);
  }
  return Status::Ok();
}

Result<std::string> readNetnsSysctl(std::string_view netns, std::string_view key) {
  RECCL_ASSIGN_OR_RETURN(std::string path, sysctlPath(key));
  UniqueFd fd;
  {
    RECCL_ASSIGN_OR_RETURN(auto guard, NetnsGuard::enter(netns));
    fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  }
  if (!fd.valid()) return Status::FromErrno(errno, "open " + path);
  char buf[256];
  ssize_t n = ::read(fd.get(), buf, sizeof(buf));
  if (n < 0) return Status::FromErrno(errno, "read " + path);
  std::string v(buf, static_cast<size_t>(n));
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}

}  // namespace reccl::netlink
