// TEMPORARY scalar stand-in for reccl_reduce, built only while ccl/reduce/ has no CMakeLists.txt
// (the vectorized kernels land separately). Delete once reccl_reduce is in main.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "reduce/reduce.h"

namespace reccl::reduce {
namespace {

template <typename T>
struct Ops {
  static T sum(T a, T b) { return static_cast<T>(a + b); }
  static T prod(T a, T b) { return static_cast<T>(a * b); }
  static T max(T a, T b) { return a > b ? a : b; }
  static T min(T a, T b) { return a < b ? a : b; }
};

template <typename T, T (*F)(T, T)>
void loop(void* dst, const void* a, const void* b, size_t n) {
  auto* d = static_cast<T*>(dst);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = F(x[i], y[i]);
}

template <bool Bf, float (*F)(float, float)>
void loop16(void* dst, const void* a, const void* b, size_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  auto* x = static_cast<const uint16_t*>(a);
  auto* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) {
    float fx = Bf ? bfloat16ToFloat(x[i]) : halfToFloat(x[i]);
    float fy = Bf ? bfloat16ToFloat(y[i]) : halfToFloat(y[i]);
    float r = F(fx, fy);
    d[i] = Bf ? floatToBfloat16(r) : floatToHalf(r);
  }
}

template <typename T>
ReduceFn pick(recclRedOp_t op) {
  switch (op) {
    case recclSum: case recclAvg: return loop<T, Ops<T>::sum>;
    case recclProd: return loop<T, Ops<T>::prod>;
    case recclMax: return loop<T, Ops<T>::max>;
    case recclMin: return loop<T, Ops<T>::min>;
    default: return nullptr;
  }
}
template <bool Bf>
ReduceFn pick16(recclRedOp_t op) {
  switch (op) {
    case recclSum: case recclAvg: return loop16<Bf, Ops<float>::sum>;
    case recclProd: return loop16<Bf, Ops<float>::prod>;
    case recclMax: return loop16<Bf, Ops<float>::max>;
    case recclMin: return loop16<Bf, Ops<float>::min>;
    default: return nullptr;
  }
}

// Wrap-around integer sums without signed-overflow UB.
template <typename T>
T wrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}

}  // namespace

ReduceFn kernel(recclDataType_t type, recclRedOp_t op) noexcept {
  if (!validType(type) || !validOp(op)) return nullptr;
  switch (type) {
    case recclInt8: return pick<int8_t>(op);
    case recclUint8: return pick<uint8_t>(op);
    case recclInt32: return pick<int32_t>(op);
    case recclUint32: return pick<uint32_t>(op);
    case recclInt64: return pick<int64_t>(op);
    case recclUint64: return pick<uint64_t>(op);
    case recclFloat16: return pick16<false>(op);
    case recclBfloat16: return pick16<true>(op);
    case recclFloat32: return pick<float>(op);
    case recclFloat64: return pick<double>(op);
    default: return nullptr;
  }
}

void finalizeAvg(void* buf, size_t count, recclDataType_t type, int nranks) noexcept {
  auto intDiv = [&](auto* p) {
    for (size_t i = 0; i < count; ++i) p[i] = static_cast<std::remove_reference_t<decltype(p[i])>>(p[i] / nranks);
  };
  switch (type) {
    case recclInt8: intDiv(static_cast<int8_t*>(buf)); break;
    case recclUint8: intDiv(static_cast<uint8_t*>(buf)); break;
    case recclInt32: intDiv(static_cast<int32_t*>(buf)); break;
    case recclUint32: intDiv(static_cast<uint32_t*>(buf)); break;
    case recclInt64: intDiv(static_cast<int64_t*>(buf)); break;
    case recclUint64: intDiv(static_cast<uint64_t*>(buf)); break;
    case recclFloat32: {
      auto* p = static_cast<float*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] = p[i] / static_cast<float>(nranks);
      break;
    }
    case recclFloat64: {
      auto* p = static_cast<double*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] = p[i] / static_cast<double>(nranks);
      break;
    }
    case recclFloat16: {
      auto* p = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] = floatToHalf(halfToFloat(p[i]) / static_cast<float>(nranks));
      break;
    }
    case recclBfloat16: {
      auto* p = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] = floatToBfloat16(bfloat16ToFloat(p[i]) / static_cast<float>(nranks));
      break;
    }
    default: break;
  }
  (void)wrapAdd<int>;
}

size_t typeSize(recclDataType_t type) noexcept {
  switch (type) {
    case recclInt8: case recclUint8: return 1;
    case recclFloat16: case recclBfloat16: return 2;
    case recclInt32: case recclUint32: case recclFloat32: return 4;
    case recclInt64: case recclUint64: case recclFloat64: return 8;
    default: return 0;
  }
}

const char* typeName(recclDataType_t type) noexcept {
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"};
  return validType(type) ? names[type] : "unknown";
}
const char* opName(recclRedOp_t op) noexcept {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return validOp(op) ? names[op] : "unknown";
}
bool validType(int type) noexcept { return type >= 0 && type < recclNumTypes; }
bool validOp(int op) noexcept { return op >= 0 && op < recclNumOps; }
const char* isaName() noexcept { return "scalar"; }

float halfToFloat(uint16_t h) noexcept {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      int e = -1;
      do { ++e; mant <<= 1; } while (!(mant & 0x400));
      bits = sign | ((127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) noexcept {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow after rounding
  if (ax < 0x38800000u) {  // subnormal half or zero
    float af;
    std::memcpy(&af, &ax, 4);
    float scaled = af * 16777216.0f;  // 2^24: half subnormal unit
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t mant = ax & 0x7fffffu;
  uint32_t exp = (ax >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float bfloat16ToFloat(uint16_t b) noexcept {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToBfloat16(float f) noexcept {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  uint32_t lsb = (x >> 16) & 1;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace reccl::reduce
