// Reference element semantics for the kernel tests, written independently of the library:
// float16 through GCC's _Float16 (libgcc's soft conversion), bfloat16 by searching the nearest
// representable value in double precision, max/min from std::isnan/std::signbit.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace reccl::reduce::testref {

inline uint32_t bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float fromBits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint64_t bits(double f) { uint64_t u; std::memcpy(&u, &f, 8); return u; }
inline double fromBits64(uint64_t u) { double f; std::memcpy(&f, &u, 8); return f; }

inline bool halfIsNan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF); }

inline float halfToFloat(uint16_t h) {
  if (halfIsNan(h))  // quieted, payload kept (what F16C does)
    return fromBits((uint32_t(h & 0x8000) << 16) | 0x7FC00000u | (uint32_t(h & 0x3FF) << 13));
  _Float16 v;
  std::memcpy(&v, &h, 2);
  return static_cast<float>(v);
}

inline uint16_t floatToHalf(float f) {
  if (std::isnan(f)) {
    uint32_t u = bits(f);
    return uint16_t(((u >> 16) & 0x8000) | 0x7E00 | ((u >> 13) & 0x3FF));
  }
  _Float16 v = static_cast<_Float16>(f);
  uint16_t h;
  std::memcpy(&h, &v, 2);
  return h;
}

inline float bf16ToFloat(uint16_t b) { return fromBits(uint32_t(b) << 16); }

inline uint16_t floatToBf16(float f) {
  uint32_t u = bits(f);
  if (std::isnan(f)) return uint16_t((u >> 16) | 0x40);
  if (std::isinf(f)) return uint16_t(u >> 16);
  uint16_t lo = uint16_t(u >> 16);
  uint16_t hi = uint16_t(lo + 1);  // next away from zero (may be infinity)
  double x = std::fabs(double(f));
  double dl = x - std::fabs(double(bf16ToFloat(lo)));
  double vh = ((hi & 0x7F80) == 0x7F80) ? std::ldexp(1.0, 128) : std::fabs(double(bf16ToFloat(hi)));
  double dh = vh - x;
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;  // tie: even
}

template <typename F>
F ieeeMax(F a, F b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? b : a;  // +0 beats -0
  return a > b ? a : b;
}
template <typename F>
F ieeeMin(F a, F b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? a : b;  // -0 beats +0
  return a < b ? a : b;
}

}  // namespace reccl::reduce::testref
