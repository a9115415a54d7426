// Instruction-set selection for the reduction kernels, exposed for tests and benchmarks that
// compare every implementation this CPU can run. Algorithms use reduce.h's kernel() instead.
#pragma once

#include "reduce.h"

namespace reccl::reduce {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// Whether this CPU (and OS, for the wider register state) runs the ISA's kernels.
// kAvx2 needs AVX2 + F16C; kAvx512 needs AVX-512 F + BW (and F16C).
bool isaSupported(Isa isa) noexcept;
const char* isaName(Isa isa) noexcept;
// The ISA kernel() hands out: the best supported one, capped by RECCL_REDUCE_ISA (read once).
Isa selectedIsa() noexcept;
// The kernel of one specific ISA, ignoring the cap; null when unsupported or (type, op) invalid.
ReduceFn kernelFor(Isa isa, recclDataType_t type, recclRedOp_t op) noexcept;
Reduce2Fn kernel2For(Isa isa, recclDataType_t type, recclRedOp_t op) noexcept;

}  // namespace reccl::reduce
