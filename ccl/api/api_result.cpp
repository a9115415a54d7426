#include "api/api_result.h"

namespace reccl::api {

recclResult_t toResult(const Status& s) noexcept {
  switch (s.code()) {
    case Errc::kOk: return recclSuccess;
    case Errc::kInvalidArgument: return recclInvalidArgument;
    case Errc::kInvalidUsage: return recclInvalidUsage;
    case Errc::kSystem: case Errc::kPermission: case Errc::kNotFound: case Errc::kExists: return recclSystemError;
    case Errc::kInternal: return recclInternalError;
    case Errc::kTimeout: return recclTimeout;
    case Errc::kLinkFailure: return recclNetworkError;
    case Errc::kPeerFailure: case Errc::kProtocol: return recclRemoteError;
    case Errc::kUnsupported: return recclInvalidUsage;
    case Errc::kAborted: return recclAborted;
  }
  return recclInternalError;
}

std::string& lastError() noexcept {
  thread_local std::string text;
  return text;
}

recclResult_t fail(const Status& s) {
  lastError() = s.message();
  return toResult(s);
}

recclResult_t fail(recclResult_t r, const std::string& msg) {
  lastError() = msg;
  return r;
}

}  // namespace reccl::api
