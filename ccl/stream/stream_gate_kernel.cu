// The gate's spinning kernel (stream_gate.h): one thread polls the mapped word, sleeping between
// looks so the memory system barely notices.
#include <cstdint>

#include "stream/stream_gate.h"

namespace reccl::stream {
namespace {

__global__ void gateSpin(const volatile uint32_t* word, uint32_t value) {
  while (static_cast<int32_t>(*word - value) < 0) __nanosleep(2000);
}

}  // namespace

cudaError_t launchGateKernel(const uint32_t* devWord, uint32_t value, cudaStream_t stream) noexcept {
  gateSpin<<<1, 1, 0, stream>>>(devWord, value);
  return cudaGetLastError();
}

}  // namespace reccl::stream
