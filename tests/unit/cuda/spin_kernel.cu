#include "spin_kernel.h"

namespace reccl::test {
namespace {

__device__ uint64_t globalNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin(uint64_t ns) {
  const uint64_t until = globalNs() + ns;
  while (globalNs() < until) __nanosleep(1000);
}

}  // namespace

cudaError_t launchSpin(cudaStream_t stream, uint32_t microseconds) noexcept {
  spin<<<1, 1, 0, stream>>>(uint64_t(microseconds) * 1000);
  return cudaGetLastError();
}

}  // namespace reccl::test
