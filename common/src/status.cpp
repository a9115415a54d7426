#include "reccl/common/status.h"

#include <cstring>

namespace reccl {

const char* errcName(Errc e) noexcept {
  switch (e) {
    case Errc::kOk: return "ok";
    case Errc::kInvalidArgument: return "invalid argument";
    case Errc::kSystem: return "system error";
    case Errc::kInternal: return "internal error";
    case Errc::kTimeout: return "timeout";
    case Errc::kLinkFailure: return "link failure";
    case Errc::kPeerFailure: return "peer failure";
    case Errc::kUnsupported: return "unsupported";
    case Errc::kAborted: return "aborted";
    case Errc::kProtocol: return "protocol error";
    case Errc::kNotFound: return "not found";
    case Errc::kExists: return "already exists";
    case Errc::kPermission: return "permission denied";
    case Errc::kInvalidUsage: return "invalid usage";
    case Errc::kDevice: return "device error";
  }
  return "unknown";
}

Status Status::FromErrno(int err, std::string_view what) {
  Errc code = Errc::kSystem;
  switch (err) {
    case EPERM:
    case EACCES: code = Errc::kPermission; break;
    case ENOENT:
    case ENODEV:
    case ESRCH: code = Errc::kNotFound; break;
    case EEXIST: code = Errc::kExists; break;
    case ETIMEDOUT: code = Errc::kTimeout; break;
    case EOPNOTSUPP:
    case ENOSYS: code = Errc::kUnsupported; break;
    case EINVAL: code = Errc::kInvalidArgument; break;
    default: break;
  }
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  return {code, std::move(msg)};
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s = errcName(code_);
  if (!message_.empty()) {
    s += ": ";
    s += message_;
  }
  return s;
}

Status Status::Wrap(std::string_view context) const& {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += message_;
  return {code_, std::move(msg)};
}

}  // namespace reccl
