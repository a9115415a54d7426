// Is there a GPU this process can use? Asked once per process, without creating a context
// (cudaGetDeviceCount loads the driver only). Tests skip with noDeviceReason() when there is none.
#pragma once

#include <string>

namespace reccl::cuda {

// CUDA devices visible to this process; 0 without a driver or a device.
int deviceCount() noexcept;
// Empty when deviceCount() > 0, else "no CUDA device (cudaGetDeviceCount: <error>)".
const std::string& noDeviceReason() noexcept;
// True when some device's primary context is active in this process: only then can a pointer
// be device memory, so the NULL-stream host path asks nothing of CUDA before that (a CUDA build
// used with host buffers never creates a context, nor its ~500 MB on the GPU).
bool anyContextActive() noexcept;
// A CUDA driver function (CUDA 12 ABI) through the runtime, or null: the static runtime loads the
// driver itself, so no binary links libcuda.
void* driverEntry(const char* name) noexcept;

}  // namespace reccl::cuda
