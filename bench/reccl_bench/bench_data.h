// Data for reccl-bench's result check, nccl-tests' idea: every rank fills its input from a
// deterministic function of (rank, index), so every rank can compute the exact expected result
// of the collective on its own. Inputs are small integers chosen so that any reduction order is
// exact in every type (sums stay within the integers a float16/bfloat16 holds exactly, products
// are +-1 or +-2; mulsum's scalars are 1 and 2), so results are checked bit for bit; only avg on
// floats allows 2 ulp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "collective.h"
#include "reccl/reccl.h"

namespace reccl::bench {

struct DataSpec {
  Coll coll = Coll::kAllReduce;
  recclDataType_t type = recclFloat32;
  recclRedOp_t op = recclSum;  // ignored by collectives without a reduction
  int nranks = 1;
  int root = 0;
};

// Rank `rank`'s input element `index` (an exact small integer).
double inputValue(const DataSpec& d, int rank, size_t index) noexcept;

// mulsum (reduce::kPreMulSum): rank `rank`'s scalar, 1 on even ranks and 2 on odd ones (exact in
// every type), as the value and as one element of `type` (typeSize bytes to out).
double preMulScalar(int rank) noexcept;
void preMulScalar(recclDataType_t type, int rank, void* out) noexcept;

// Writes shape.sendCount input elements of `rank` to send.
void fillInput(const DataSpec& d, int rank, const Shape& shape, void* send) noexcept;

// Wrong elements in `rank`'s receive buffer (shape.recvCount elements; 0 for a non-root rank of
// reduce, whose receive buffer is unspecified). firstWrong, when given, gets the first index.
size_t countWrong(const DataSpec& d, int rank, const Shape& shape, const void* recv,
                  size_t* firstWrong = nullptr) noexcept;

// Writes the expected element `index` of `rank`'s receive buffer to out (typeSize bytes).
void expectedElement(const DataSpec& d, int rank, const Shape& shape, size_t index, void* out) noexcept;

}  // namespace reccl::bench
