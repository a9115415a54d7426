// preMultiply (reduce.h): a PreMulSum's first pass, each element times the rank's scalar.
//
// It is the product kernel of the type against a block that holds the scalar in every element:
// the same vector code and the same semantics as recclProd (integers wrap, float16 and bfloat16
// multiply in float32 and round once, which for two of them is the correctly rounded product),
// a block at a time so the scalar block stays in L1.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "reduce/reduce.h"

namespace reccl::reduce {

void preMultiply(const void* in, void* out, size_t count, recclDataType_t type, const void* scalar) noexcept {
  const size_t es = typeSize(type);
  const ReduceFn mul = kernel(type, recclProd);
  if (es == 0 || !mul) return;
  constexpr size_t kBlockBytes = 4096;
  alignas(64) std::byte block[kBlockBytes];
  const size_t per = kBlockBytes / es;
  for (size_t i = 0; i < per; ++i) std::memcpy(block + i * es, scalar, es);
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  for (size_t off = 0; off < count; off += per) {
    const size_t n = std::min(per, count - off);
    mul(dst + off * es, src + off * es, block, n);
  }
}

}  // namespace reccl::reduce
