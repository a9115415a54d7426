// Portable kernels: the fallback on CPUs without AVX2 and the reference the vector units match.
// Loads and stores go through memcpy so any alignment of the caller's buffers is fine.
#include <cstring>
#include <type_traits>

#include "kernel_table.h"
#include "scalar_ops.h"

namespace reccl::reduce {
namespace {

using namespace detail;

template <typename T>
struct IntSum {
  using Store = T;
  static T op(T a, T b) {
    using U = std::make_unsigned_t<T>;
    return T(U(U(a) + U(b)));
  }
};
template <typename T>
struct IntProd {
  using Store = T;
  static T op(T a, T b) {
    // Promote to at least unsigned int so uint8 * uint8 cannot overflow a signed int.
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return T(std::make_unsigned_t<T>(U(std::make_unsigned_t<T>(a)) * U(std::make_unsigned_t<T>(b))));
  }
};
template <typename T>
struct IntMax {
  using Store = T;
  static T op(T a, T b) { return a > b ? a : b; }
};
template <typename T>
struct IntMin {
  using Store = T;
  static T op(T a, T b) { return a < b ? a : b; }
};

template <typename T>
struct FSum {
  using Store = T;
  static T op(T a, T b) { return a + b; }
};
template <typename T>
struct FProd {
  using Store = T;
  static T op(T a, T b) { return a * b; }
};
struct F32Max {
  using Store = float;
  static float op(float a, float b) { return maxF(a, b); }
};
struct F32Min {
  using Store = float;
  static float op(float a, float b) { return minF(a, b); }
};
struct F64Max {
  using Store = double;
  static double op(double a, double b) { return maxD(a, b); }
};
struct F64Min {
  using Store = double;
  static double op(double a, double b) { return minD(a, b); }
};

// float16 / bfloat16: widen, apply the float32 op, round to nearest-even on store.
template <typename F32Op>
struct Half {
  using Store = uint16_t;
  static uint16_t op(uint16_t a, uint16_t b) {
    return floatToHalfScalar(F32Op::op(halfToFloatScalar(a), halfToFloatScalar(b)));
  }
};
template <typename F32Op>
struct Bf16 {
  using Store = uint16_t;
  static uint16_t op(uint16_t a, uint16_t b) {
    return floatToBf16Scalar(F32Op::op(bf16ToFloatScalar(a), bf16ToFloatScalar(b)));
  }
};

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
  auto ints = [&t]<typename T>(recclDataType_t type, T*) {
    t.fn[type][recclSum] = k<IntSum<T>>();
    t.fn[type][recclProd] = k<IntProd<T>>();
    t.fn[type][recclMax] = k<IntMax<T>>();
    t.fn[type][recclMin] = k<IntMin<T>>();
  };
  ints(recclInt8, static_cast<int8_t*>(nullptr));
  ints(recclUint8, static_cast<uint8_t*>(nullptr));
  ints(recclInt32, static_cast<int32_t*>(nullptr));
  ints(recclUint32, static_cast<uint32_t*>(nullptr));
  ints(recclInt64, static_cast<int64_t*>(nullptr));
  ints(recclUint64, static_cast<uint64_t*>(nullptr));
  t.fn[recclFloat32][recclSum] = k<FSum<float>>();
  t.fn[recclFloat32][recclProd] = k<FProd<float>>();
  t.fn[recclFloat32][recclMax] = k<F32Max>();
  t.fn[recclFloat32][recclMin] = k<F32Min>();
  t.fn[recclFloat64][recclSum] = k<FSum<double>>();
  t.fn[recclFloat64][recclProd] = k<FProd<double>>();
  t.fn[recclFloat64][recclMax] = k<F64Max>();
  t.fn[recclFloat64][recclMin] = k<F64Min>();
  t.fn[recclFloat16][recclSum] = k<Half<FSum<float>>>();
  t.fn[recclFloat16][recclProd] = k<Half<FProd<float>>>();
  t.fn[recclFloat16][recclMax] = k<Half<F32Max>>();
  t.fn[recclFloat16][recclMin] = k<Half<F32Min>>();
  t.fn[recclBfloat16][recclSum] = k<Bf16<FSum<float>>>();
  t.fn[recclBfloat16][recclProd] = k<Bf16<FProd<float>>>();
  t.fn[recclBfloat16][recclMax] = k<Bf16<F32Max>>();
  t.fn[recclBfloat16][recclMin] = k<Bf16<F32Min>>();
  return t;
}

}  // namespace

const KernelTable& scalarKernels() noexcept {
  static const KernelTable table = makeTable();
  return table;
}

}  // namespace reccl::reduce
