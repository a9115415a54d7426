// reduce::PreMul (reduce.h): a PreMulSum's multiply, fused into the reads of a rank's input.
//
// The multiply is the type's product kernel against a block that holds the scalar in every
// element: the same vector code and the same semantics as recclProd (integers wrap, float16 and
// bfloat16 multiply in float32 and round once, which for two of them is the correctly rounded
// product). Fused with a sum, the input is scaled a block at a time into a second block on the
// stack and the sum's kernel reads that block while it is in L1: the scaled input never goes to
// memory, and the result has the bits of a scaling pass followed by the sum.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "reduce/reduce.h"

namespace reccl::reduce {

PreMul::PreMul(recclDataType_t type, const void* scalar) noexcept
    : es_(typeSize(type)), mul_(kernel(type, recclProd)), add_(kernel(type, recclSum)), add2_(kernel2(type, recclSum)) {
  if (es_ == 0 || !mul_) return;
  per_ = kBlockBytes / es_;
  for (size_t i = 0; i < per_; ++i) std::memcpy(block_ + i * es_, scalar, es_);
}

void PreMul::scale(void* out, const void* in, size_t count) const noexcept {
  if (per_ == 0) return;
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  for (size_t off = 0; off < count; off += per_) {
    const size_t n = std::min(per_, count - off);
    mul_(dst + off * es_, src + off * es_, block_, n);
  }
}

void PreMul::addScaled(void* dst, const void* a, const void* in, size_t count) const noexcept {
  addScaled2(dst, nullptr, a, in, count);
}

void PreMul::addScaled2(void* dst, void* dst2, const void* a, const void* in, size_t count) const noexcept {
  if (per_ == 0) return;
  alignas(64) std::byte scaled[kBlockBytes];
  const auto* pa = static_cast<const std::byte*>(a);
  const auto* src = static_cast<const std::byte*>(in);
  auto* d = static_cast<std::byte*>(dst);
  auto* d2 = static_cast<std::byte*>(dst2);
  // Block by block in order: where dst aliases `in`, a block is read (scaled) before it is
  // written, and no later block reads what an earlier one wrote.
  for (size_t off = 0; off < count; off += per_) {
    const size_t n = std::min(per_, count - off), at = off * es_;
    mul_(scaled, src + at, block_, n);
    if (d2)
      add2_(d + at, d2 + at, pa + at, scaled, n);
    else
      add_(d + at, pa + at, scaled, n);
  }
}

}  // namespace reccl::reduce
