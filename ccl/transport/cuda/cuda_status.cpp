#include "transport/cuda/cuda_status.h"

#include <string>

namespace reccl::cuda {

Status cudaStatus(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return Status::Ok();
  (void)cudaGetLastError();
  std::string msg(what);
  // The call's text may carry its arguments: keep the name only.
  if (auto paren = msg.find('('); paren != std::string::npos) msg.resize(paren);
  msg += ": ";
  msg += cudaGetErrorName(e);
  msg += " (";
  msg += cudaGetErrorString(e);
  msg += ")";
  return Status(Errc::kDevice, std::move(msg));
}

}  // namespace reccl::cuda
