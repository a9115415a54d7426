// Element semantics shared by every kernel: the scalar kernels use them for the whole buffer,
// the vector kernels match them lane for lane. Everything here has internal linkage (static)
// on purpose: this header is included by units compiled for different ISAs (see kernel_table.h).
//
// Chosen semantics (the C API leaves them open):
// - Integers: sum and prod wrap modulo 2^bits (computed on the unsigned type, no signed-overflow
//   UB); max/min compare signed or unsigned as the type says.
// - Floats: sum and prod are IEEE operations in the element's precision (float16/bfloat16 in
//   float32, rounded to nearest-even on store). NaN in, NaN out; the payload of a NaN produced
//   by sum/prod is whatever the hardware gives.
// - max/min follow IEEE 754-2019 maximum/minimum: a NaN operand wins (a's if both are NaN, bits
//   kept, quieted when it passes through float16/bfloat16), and -0 < +0.
// - float16 -> float32 quiets signalling NaNs (as F16C does); bfloat16 -> float32 is a shift.
// The CUDA kernels (cuda/) include this header too, so host and device share one definition of
// these semantics: RECCL_HD marks the functions for both sides under nvcc.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define RECCL_HD __host__ __device__
#else
#define RECCL_HD
#endif

namespace reccl::reduce::detail {

static inline RECCL_HD uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static inline RECCL_HD float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
static inline RECCL_HD uint64_t bitsOf(double f) {
  uint64_t u;
  std::memcpy(&u, &f, 8);
  return u;
}
static inline RECCL_HD double doubleOf(uint64_t u) {
  double f;
  std::memcpy(&f, &u, 8);
  return f;
}

static inline RECCL_HD float halfToFloatScalar(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  if (exp == 0) {
    if (man == 0) return floatOf(sign);
    // Subnormal half: normalize into a float32 normal.
    uint32_t e = 113;  // 127 - 15 + 1
    while (!(man & 0x400u)) {
      man <<= 1;
      --e;
    }
    return floatOf(sign | (e << 23) | ((man & 0x3FFu) << 13));
  }
  if (exp == 31) return floatOf(sign | 0x7F800000u | (man << 13) | (man ? 0x400000u : 0));
  return floatOf(sign | ((exp + 112) << 23) | (man << 13));
}

static inline RECCL_HD uint16_t floatToHalfScalar(float f) {
  uint32_t u = bitsOf(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7FFFFFFFu;
  if (u >= 0x7F800000u)  // inf, or NaN: quieted, top payload bits kept (as F16C)
    return uint16_t(u == 0x7F800000u ? sign | 0x7C00u : sign | 0x7E00u | ((u >> 13) & 0x3FFu));
  if (u >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // >= 65520 rounds to infinity
  if (u < 0x38800000u) {                                    // below 2^-14: half subnormal or 0
    uint32_t e = u >> 23;
    if (e < 102) return uint16_t(sign);  // below 2^-25: rounds to zero (2^-25 itself ties to 0)
    uint32_t mant = (u & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126 - e;  // value / 2^-24 = mant * 2^(e - 126)
    uint32_t r = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = (u >> 13) - (112u << 10);
  uint32_t rem = u & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) ++r;
  return uint16_t(sign | r);
}

static inline RECCL_HD float bf16ToFloatScalar(uint16_t b) { return floatOf(uint32_t(b) << 16); }

static inline RECCL_HD uint16_t floatToBf16Scalar(float f) {
  uint32_t u = bitsOf(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// IEEE 754-2019 maximum/minimum with a's NaN first; equal values: +0 wins max, -0 wins min
// (bitwise and/or of equal-valued operands does exactly that).
static inline RECCL_HD float maxF(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a > b) return a;
  if (b > a) return b;
  return floatOf(bitsOf(a) & bitsOf(b));
}
static inline RECCL_HD float minF(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a < b) return a;
  if (b < a) return b;
  return floatOf(bitsOf(a) | bitsOf(b));
}
static inline RECCL_HD double maxD(double a, double b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a > b) return a;
  if (b > a) return b;
  return doubleOf(bitsOf(a) & bitsOf(b));
}
static inline RECCL_HD double minD(double a, double b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a < b) return a;
  if (b < a) return b;
  return doubleOf(bitsOf(a) | bitsOf(b));
}

// avg's integer division: the (wrapped) sum divided by the rank count, truncating toward zero, in
// 64 bits, so a count past the type's range (128 ranks on int8, 256 on uint8) neither wraps the
// divisor (a wrong sign, or a division by zero) nor loses precision.
template <typename T>
static inline RECCL_HD T divideByRanks(T v, int nranks) {
  if constexpr (std::is_signed_v<T>) {
    return T(int64_t(v) / int64_t(nranks));
  } else {
    return T(uint64_t(v) / uint64_t(nranks));
  }
}

}  // namespace reccl::reduce::detail
