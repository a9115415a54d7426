// Element-wise reduction kernels on the GPU for every reccl data type and op, the device twin of
// reduce.h: the same table shape (type x op; avg is the sum, then finalizeAvg's division) and the same
// element semantics bit for bit (scalar_ops.h: integer wrap, IEEE maximum/minimum with the NaN
// kept, float16/bfloat16 reduced in float32 and rounded to nearest even), except the payload of
// a NaN that a sum or product makes (the hardware's canonical NaN on the GPU).
//
// Loads and stores are 16-byte vectors where the three pointers share their alignment (a scalar
// head and tail around them), else element by element. Every launcher enqueues on `stream` and
// returns the launch's error; none synchronizes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "reccl/reccl.h"

namespace reccl::reduce::cuda {

// dst[i] = a[i] OP b[i], i < count, all three device-accessible; dst may alias a or b exactly.
using DeviceReduceFn = cudaError_t (*)(void* dst, const void* a, const void* b, size_t count, cudaStream_t stream);
// dst[i] = (a[i] + b[i]) / nranks: the sum rounded to the type, then finalizeAvg's division, in one
// pass over memory.
using DeviceAvgFn = cudaError_t (*)(void* dst, const void* a, const void* b, size_t count, int nranks,
                                    cudaStream_t stream);

inline constexpr int kDeviceKernelOps = 4;  // sum, prod, max, min; avg uses the sum entry

struct DeviceKernelTable {
  DeviceReduceFn fn[recclNumTypes][kDeviceKernelOps];
  DeviceAvgFn avg[recclNumTypes];
};

// Built without touching the GPU (plain function pointers): safe to read on a machine without one.
const DeviceKernelTable& deviceKernels() noexcept;

// Null for an invalid (type, op).
DeviceReduceFn deviceKernel(recclDataType_t type, recclRedOp_t op) noexcept;

// Launches kernel(type, op); for recclAvg the table's avg (sum and division). cudaErrorInvalidValue for
// an invalid type or op or nranks < 1.
cudaError_t launchReduce(void* dst, const void* a, const void* b, size_t count, recclDataType_t type,
                         recclRedOp_t op, int nranks, cudaStream_t stream) noexcept;

// Vector width of the loads (bytes) and whether the fast path applies to these pointers, exposed
// for tests and the benchmark.
inline constexpr size_t kVectorBytes = 16;
bool vectorPath(const void* dst, const void* a, const void* b, size_t elemBytes) noexcept;

}  // namespace reccl::reduce::cuda
