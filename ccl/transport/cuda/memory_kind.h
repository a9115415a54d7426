// Where a buffer lives, asked of CUDA once per buffer per call (cudaPointerGetAttributes, ~1 us).
// Host memory, registered (pinned) host memory and managed memory are all things the library can
// reach from the CPU; only device memory must be staged through pinned host memory.
#pragma once

#include <cuda_runtime_api.h>

#include "reccl/common/status.h"

namespace reccl::cuda {

enum class MemoryKind {
  kHost,       // pageable host memory, or anything CUDA does not know
  kPinned,     // host memory CUDA allocated or registered (cudaHostAlloc, cudaHostRegister)
  kDevice,     // device memory (cudaMalloc, cudaMallocAsync, VMM)
  kManaged,    // unified memory (cudaMallocManaged)
};

const char* memoryKindName(MemoryKind k) noexcept;  // "host", "pinned", "device", "managed"

struct PointerInfo {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;  // the owning device for device and managed memory, else -1
};

// The decision from what cudaPointerGetAttributes returned (pure, for tests): an error that
// means "CUDA cannot know this pointer" (no driver, no device, an unregistered pointer on an old
// driver) reads as host memory; any other error is returned.
Result<PointerInfo> pointerInfoFrom(cudaError_t e, const cudaPointerAttributes& a);

// Asks CUDA. Without a usable device this is host memory, without an error.
Result<PointerInfo> classifyPointer(const void* p);

// True for memory the staging path must copy with the GPU (device; managed is copied the same
// way, so the CPU never faults pages back from the GPU in the middle of a collective).
inline bool needsGpuCopy(MemoryKind k) noexcept { return k == MemoryKind::kDevice || k == MemoryKind::kManaged; }

}  // namespace reccl::cuda
