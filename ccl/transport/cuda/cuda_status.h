// CUDA runtime results as reccl Status: Errc::kDevice with the call and the runtime's own name
// and text of the error ("cudaMemcpyAsync: cudaErrorInvalidValue (invalid argument)").
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>

#include "reccl/common/status.h"

namespace reccl::cuda {

// Ok for cudaSuccess. Also clears the runtime's last error, so a failure does not show up again
// in an unrelated later call's cudaGetLastError.
Status cudaStatus(cudaError_t e, std::string_view what);

}  // namespace reccl::cuda

// Returns from the enclosing function when a CUDA runtime call fails; the message names the call.
#define RECCL_CUDA_TRY(call) RECCL_TRY(::reccl::cuda::cudaStatus((call), #call))
