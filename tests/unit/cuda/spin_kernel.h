// A kernel that holds a stream for a while: work placed behind it that a collective did not
// wait for would be read too early, so ordering tests put their input copy behind it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace reccl::test {
cudaError_t launchSpin(cudaStream_t stream, uint32_t microseconds) noexcept;
}  // namespace reccl::test
