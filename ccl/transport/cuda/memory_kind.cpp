#include "transport/cuda/memory_kind.h"

#include "transport/cuda/cuda_status.h"
#include "transport/cuda/device_probe.h"

namespace reccl::cuda {

const char* memoryKindName(MemoryKind k) noexcept {
  switch (k) {
    case MemoryKind::kHost: return "host";
    case MemoryKind::kPinned: return "pinned";
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kManaged: return "managed";
  }
  return "unknown";
}

Result<PointerInfo> pointerInfoFrom(cudaError_t e, const cudaPointerAttributes& a) {
  switch (e) {
    case cudaSuccess: break;
    case cudaErrorInvalidValue:         // drivers before CUDA 11 for unregistered host memory
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
      return PointerInfo{};
    default:
      return cudaStatus(e, "cudaPointerGetAttributes");
  }
  switch (a.type) {
    case cudaMemoryTypeUnregistered: return PointerInfo{};
    case cudaMemoryTypeHost: return PointerInfo{MemoryKind::kPinned, -1};
    case cudaMemoryTypeDevice: return PointerInfo{MemoryKind::kDevice, a.device};
    case cudaMemoryTypeManaged: return PointerInfo{MemoryKind::kManaged, a.device};
  }
  return Status(Errc::kDevice, "cudaPointerGetAttributes: unknown memory type " + std::to_string(int(a.type)));
}

Result<PointerInfo> classifyPointer(const void* p) {
  if (!p || deviceCount() == 0) return PointerInfo{};
  cudaPointerAttributes a{};
  cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e != cudaSuccess) (void)cudaGetLastError();
  return pointerInfoFrom(e, a);
}

}  // namespace reccl::cuda
