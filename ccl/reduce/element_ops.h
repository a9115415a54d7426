// One definition of each (type, op) element operation and of the list of all of them, shared
// by the portable CPU kernels (kernels_scalar.cpp) and the CUDA kernels (cuda/): both tables are
// filled by forEachElementOp, so neither can miss a pair the other has. Semantics: scalar_ops.h.
//
// Everything sits in an unnamed namespace (internal linkage in each unit that includes it), for
// the reason kernel_table.h gives; the AVX units never include this header.
#pragma once

#include <cstdint>
#include <type_traits>

#include "reccl/reccl.h"
#include "scalar_ops.h"

namespace reccl::reduce::detail {
namespace {

template <typename T>
struct IntSum {
  using Store = T;
  static RECCL_HD T op(T a, T b) {
    using U = std::make_unsigned_t<T>;
    return T(U(U(a) + U(b)));
  }
};
template <typename T>
struct IntProd {
  using Store = T;
  static RECCL_HD T op(T a, T b) {
    // Promote to at least unsigned int so uint8 * uint8 cannot overflow a signed int.
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return T(std::make_unsigned_t<T>(U(std::make_unsigned_t<T>(a)) * U(std::make_unsigned_t<T>(b))));
  }
};
template <typename T>
struct IntMax {
  using Store = T;
  static RECCL_HD T op(T a, T b) { return a > b ? a : b; }
};
template <typename T>
struct IntMin {
  using Store = T;
  static RECCL_HD T op(T a, T b) { return a < b ? a : b; }
};

template <typename T>
struct FSum {
  using Store = T;
  static RECCL_HD T op(T a, T b) { return a + b; }
};
template <typename T>
struct FProd {
  using Store = T;
  static RECCL_HD T op(T a, T b) { return a * b; }
};
struct F32Max {
  using Store = float;
  static RECCL_HD float op(float a, float b) { return maxF(a, b); }
};
struct F32Min {
  using Store = float;
  static RECCL_HD float op(float a, float b) { return minF(a, b); }
};
struct F64Max {
  using Store = double;
  static RECCL_HD double op(double a, double b) { return maxD(a, b); }
};
struct F64Min {
  using Store = double;
  static RECCL_HD double op(double a, double b) { return minD(a, b); }
};

// float16 / bfloat16 through the portable conversions: widen, apply the float32 op, round to
// nearest-even on store. (The CUDA kernels wrap the same float32 ops with hardware conversions.)
template <typename F32Op>
struct Half {
  using Store = uint16_t;
  static RECCL_HD uint16_t op(uint16_t a, uint16_t b) {
    return floatToHalfScalar(F32Op::op(halfToFloatScalar(a), halfToFloatScalar(b)));
  }
};
template <typename F32Op>
struct Bf16 {
  using Store = uint16_t;
  static RECCL_HD uint16_t op(uint16_t a, uint16_t b) {
    return floatToBf16Scalar(F32Op::op(bf16ToFloatScalar(a), bf16ToFloatScalar(b)));
  }
};

// Calls f.template operator()<Op>(type, op) once for every valid (type, op) but avg (which uses
// the sum), with Op the element operation; HalfW / Bf16W wrap a float32 op for the 16-bit floats.
template <template <class> class HalfW, template <class> class Bf16W, typename F>
void forEachElementOp(F&& f) {
  auto ints = [&f]<typename T>(recclDataType_t type, T*) {
    f.template operator()<IntSum<T>>(type, recclSum);
    f.template operator()<IntProd<T>>(type, recclProd);
    f.template operator()<IntMax<T>>(type, recclMax);
    f.template operator()<IntMin<T>>(type, recclMin);
  };
  ints(recclInt8, static_cast<int8_t*>(nullptr));
  ints(recclUint8, static_cast<uint8_t*>(nullptr));
  ints(recclInt32, static_cast<int32_t*>(nullptr));
  ints(recclUint32, static_cast<uint32_t*>(nullptr));
  ints(recclInt64, static_cast<int64_t*>(nullptr));
  ints(recclUint64, static_cast<uint64_t*>(nullptr));
  f.template operator()<FSum<float>>(recclFloat32, recclSum);
  f.template operator()<FProd<float>>(recclFloat32, recclProd);
  f.template operator()<F32Max>(recclFloat32, recclMax);
  f.template operator()<F32Min>(recclFloat32, recclMin);
  f.template operator()<FSum<double>>(recclFloat64, recclSum);
  f.template operator()<FProd<double>>(recclFloat64, recclProd);
  f.template operator()<F64Max>(recclFloat64, recclMax);
  f.template operator()<F64Min>(recclFloat64, recclMin);
  f.template operator()<HalfW<FSum<float>>>(recclFloat16, recclSum);
  f.template operator()<HalfW<FProd<float>>>(recclFloat16, recclProd);
  f.template operator()<HalfW<F32Max>>(recclFloat16, recclMax);
  f.template operator()<HalfW<F32Min>>(recclFloat16, recclMin);
  f.template operator()<Bf16W<FSum<float>>>(recclBfloat16, recclSum);
  f.template operator()<Bf16W<FProd<float>>>(recclBfloat16, recclProd);
  f.template operator()<Bf16W<F32Max>>(recclBfloat16, recclMax);
  f.template operator()<Bf16W<F32Min>>(recclBfloat16, recclMin);
}

}  // namespace
}  // namespace reccl::reduce::detail
