// Internal: one table of kernels per instruction set, filled by the per-ISA translation units.
// Each ISA unit is compiled with its own -m flags, so it exposes only this table and keeps every
// function at internal linkage: an inline function shared across units could otherwise be emitted
// with AVX-512 instructions and picked by the linker for the scalar path.
#pragma once

#include "reduce.h"

namespace reccl::reduce {

// Kernels per (type, op) for sum, prod, max, min; avg uses the sum entry.
inline constexpr int kKernelOps = 4;

// One (type, op): the plain kernel and the two-output variant (reduce.h's kernel2()).
struct KernelPair {
  ReduceFn one;
  Reduce2Fn two;
};

struct KernelTable {
  KernelPair fn[recclNumTypes][kKernelOps];
};

const KernelTable& scalarKernels() noexcept;
const KernelTable& avx2Kernels() noexcept;
const KernelTable& avx512Kernels() noexcept;

}  // namespace reccl::reduce
