// Portable kernels: the fallback on CPUs without AVX2 and the reference the vector units match.
// Loads and stores go through memcpy so any alignment of the caller's buffers is fine.
#include <cstring>

#include "element_ops.h"
#include "kernel_table.h"

namespace reccl::reduce {
namespace {

using namespace detail;

// The one loop behind both kernel shapes; kTwo also stores each result to dst2. Reads element i
// before writing it, so dst may alias a or b exactly; dst2 aliases nothing.
template <typename Op, bool kTwo>
void applyImpl(void* dst, void* dst2, const void* a, const void* b, size_t count) {
  using T = typename Op::Store;
  auto* d = static_cast<unsigned char*>(dst);
  auto* d2 = static_cast<unsigned char*>(dst2);
  auto* pa = static_cast<const unsigned char*>(a);
  auto* pb = static_cast<const unsigned char*>(b);
  for (size_t i = 0; i < count; ++i) {
    T x, y;
    std::memcpy(&x, pa + i * sizeof(T), sizeof(T));
    std::memcpy(&y, pb + i * sizeof(T), sizeof(T));
    T r = Op::op(x, y);
    std::memcpy(d + i * sizeof(T), &r, sizeof(T));
    if constexpr (kTwo) std::memcpy(d2 + i * sizeof(T), &r, sizeof(T));
  }
}

template <typename Op>
void apply(void* dst, const void* a, const void* b, size_t count) {
  applyImpl<Op, false>(dst, nullptr, a, b, count);
}

template <typename Op>
constexpr KernelPair k() {
  return {apply<Op>, applyImpl<Op, true>};
}

KernelTable makeTable() {
  KernelTable t{};
  forEachElementOp<Half, Bf16>([&t]<typename Op>(recclDataType_t type, recclRedOp_t op) { t.fn[type][op] = k<Op>(); });
  return t;
}

}  // namespace

const KernelTable& scalarKernels() noexcept {
  static const KernelTable table = makeTable();
  return table;
}

}  // namespace reccl::reduce
