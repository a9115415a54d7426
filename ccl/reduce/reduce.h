// Element-wise reduction kernels for every reccl data type and op, vectorized (AVX-512 / AVX2
// chosen at run time from the CPU's features, scalar fallback). float16 and bfloat16 reduce in
// float32 and round to nearest-even on store. The layer below the algorithms: no I/O, no state.
#pragma once

#include <cstddef>
#include <cstdint>

#include "reccl/reccl.h"

namespace reccl::reduce {

// dst[i] = a[i] OP b[i] for i < count. dst may alias a or b exactly (not partially).
// For recclAvg the kernel is the sum; call finalizeAvg once on the fully reduced data.
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);

// Never null for valid (type, op); null for out-of-range values.
ReduceFn kernel(recclDataType_t type, recclRedOp_t op) noexcept;

// dst[i] = dst2[i] = a[i] OP b[i]: the reduction and a copy of its result in one pass (a step
// that keeps the result and also sends it). dst may alias a or b exactly; dst2 aliases nothing.
// Same bits as kernel() in both outputs.
using Reduce2Fn = void (*)(void* dst, void* dst2, const void* a, const void* b, size_t count);
Reduce2Fn kernel2(recclDataType_t type, recclRedOp_t op) noexcept;

// buf[i] = buf[i] / nranks (integers: truncating division, like NCCL; floats: in float32 or
// float64 precision, rounded once).
void finalizeAvg(void* buf, size_t count, recclDataType_t type, int nranks) noexcept;

// The op a PreMulSum (recclRedOpCreatePreMulSum) runs as below the API: the sum of every rank's
// input times that rank's own scalar. Its kernels are the sum's, each read of the input scaled on
// the way (PreMul).
inline constexpr recclRedOp_t kPreMulSum = static_cast<recclRedOp_t>(recclNumOps);
// The kernel op of `op`: the sum for avg and PreMulSum, `op` itself otherwise.
inline recclRedOp_t kernelOp(recclRedOp_t op) noexcept {
  return op == recclAvg || op == kPreMulSum ? recclSum : op;
}

// A PreMulSum's multiply by one rank's scalar: in[i] * scalar with the product kernel's semantics
// (integers wrap modulo 2^bits; float16 and bfloat16 multiply in float32 and round once), fused
// into the step that reads the input. Every output has the bits of scaling the whole input first
// and then running the plain kernel. Holds one block of the scalar (kBlockBytes): build it once per
// use, not per element range. Does nothing for an invalid type.
class PreMul {
 public:
  static constexpr size_t kBlockBytes = 4096;

  PreMul(recclDataType_t type, const void* scalar) noexcept;  // scalar: one element of `type`

  // out[i] = in[i] * s. out may alias in exactly.
  void scale(void* out, const void* in, size_t count) const noexcept;
  // dst[i] = a[i] + in[i] * s (the sum kernel of a and the rounded product). dst may alias a or
  // in exactly.
  void addScaled(void* dst, const void* a, const void* in, size_t count) const noexcept;
  // addScaled into dst and dst2 in one pass (kernel2's contract: dst2 aliases nothing).
  void addScaled2(void* dst, void* dst2, const void* a, const void* in, size_t count) const noexcept;

 private:
  size_t es_ = 0;
  size_t per_ = 0;  // elements per block; 0 for an invalid type
  ReduceFn mul_ = nullptr;
  ReduceFn add_ = nullptr;
  Reduce2Fn add2_ = nullptr;
  alignas(64) std::byte block_[kBlockBytes];
};

size_t typeSize(recclDataType_t type) noexcept;  // 0 for an invalid type
const char* typeName(recclDataType_t type) noexcept;  // nccl-tests names: "float", "half", ...
const char* opName(recclRedOp_t op) noexcept;        // "sum", "prod", "max", "min", "avg", "premulsum"
bool validType(int type) noexcept;
bool validOp(int op) noexcept;

// Which implementation kernel() hands out on this CPU: "avx512", "avx2" or "scalar".
// RECCL_REDUCE_ISA=scalar|avx2|avx512 caps it (for tests and benchmarks).
const char* isaName() noexcept;

// IEEE half / bfloat16 conversions (round to nearest even), exposed for tests and benchmarks.
float halfToFloat(uint16_t h) noexcept;
uint16_t floatToHalf(float f) noexcept;
float bfloat16ToFloat(uint16_t b) noexcept;
uint16_t floatToBfloat16(float f) noexcept;

}  // namespace reccl::reduce
