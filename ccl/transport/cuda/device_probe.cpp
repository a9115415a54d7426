#include "transport/cuda/device_probe.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace reccl::cuda {
namespace {

struct Probe {
  int count = 0;
  std::string reason;
};

const Probe& probe() noexcept {
  static const Probe p = [] {
    Probe r;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      r.reason = std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " +
                 cudaGetErrorString(e) + ")";
    } else if (n <= 0) {
      r.reason = "no CUDA device (cudaGetDeviceCount: 0 devices)";
    } else {
      r.count = n;
    }
    return r;
  }();
  return p;
}

using DeviceGet = CUresult (*)(CUdevice*, int);
using PrimaryCtxGetState = CUresult (*)(CUdevice, unsigned int*, int*);

}  // namespace

void* driverEntry(const char* name) noexcept {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return f;
}

int deviceCount() noexcept { return probe().count; }
const std::string& noDeviceReason() noexcept { return probe().reason; }

bool anyContextActive() noexcept {
  if (deviceCount() == 0) return false;
  static const auto deviceGet = reinterpret_cast<DeviceGet>(driverEntry("cuDeviceGet"));
  static const auto getState = reinterpret_cast<PrimaryCtxGetState>(driverEntry("cuDevicePrimaryCtxGetState"));
  if (!deviceGet || !getState) return true;  // cannot tell: classify pointers as if one were
  for (int d = 0; d < deviceCount(); ++d) {
    CUdevice dev{};
    unsigned flags = 0;
    int active = 0;
    if (deviceGet(&dev, d) == CUDA_SUCCESS && getState(dev, &flags, &active) == CUDA_SUCCESS && active) return true;
  }
  return false;
}

}  // namespace reccl::cuda
