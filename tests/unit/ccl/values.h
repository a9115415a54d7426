// Exact-sum test values and reference results for every type and op (nccl-tests' trick: small
// integers, so floating-point sums are exact in every order; avg is checked within 2 ulp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "reccl/reccl.h"
#include "reduce/reduce.h"

namespace reccl::test {

inline bool isSigned(recclDataType_t t) {
  return t == recclInt8 || t == recclInt32 || t == recclInt64 || t == recclFloat16 || t == recclFloat32 ||
         t == recclFloat64 || t == recclBfloat16;
}
inline bool isFloat(recclDataType_t t) {
  return t == recclFloat16 || t == recclFloat32 || t == recclFloat64 || t == recclBfloat16;
}

// Input of `rank` at element i for op (small integers, fit int8 after reducing over 8 ranks).
inline double inputValue(int rank, size_t i, recclDataType_t t, recclRedOp_t op) {
  switch (op) {
    case recclProd: return ((i + rank) % 3 == 0) ? 2.0 : 1.0;
    case recclMax:
    case recclMin: {
      double v = static_cast<double>((rank * 7 + i * 3) % 11);
      return isSigned(t) ? v - 5.0 : v;
    }
    default: return static_cast<double>((i * 3 + rank * 5) % 7);  // sum, avg: <= 6 * 8 = 48
  }
}

inline double reduceRef(int n, size_t i, recclDataType_t t, recclRedOp_t op, size_t elemOffsetSeed = 0) {
  double acc = inputValue(0, i + elemOffsetSeed, t, op);
  for (int r = 1; r < n; ++r) {
    double v = inputValue(r, i + elemOffsetSeed, t, op);
    switch (op) {
      case recclSum: case recclAvg: acc += v; break;
      case recclProd: acc *= v; break;
      case recclMax: acc = std::max(acc, v); break;
      case recclMin: acc = std::min(acc, v); break;
      default: break;
    }
  }
  if (op == recclAvg) acc = isFloat(t) ? acc / n : std::trunc(acc / n);
  return acc;
}

inline void setValue(void* buf, size_t i, recclDataType_t t, double v) {
  switch (t) {
    case recclInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case recclUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case recclInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case recclUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v); break;
    case recclInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case recclUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v); break;
    case recclFloat16: static_cast<uint16_t*>(buf)[i] = reduce::floatToHalf(static_cast<float>(v)); break;
    case recclBfloat16: static_cast<uint16_t*>(buf)[i] = reduce::floatToBfloat16(static_cast<float>(v)); break;
    case recclFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case recclFloat64: static_cast<double*>(buf)[i] = v; break;
    default: break;
  }
}

inline double getValue(const void* buf, size_t i, recclDataType_t t) {
  switch (t) {
    case recclInt8: return static_cast<const int8_t*>(buf)[i];
    case recclUint8: return static_cast<const uint8_t*>(buf)[i];
    case recclInt32: return static_cast<const int32_t*>(buf)[i];
    case recclUint32: return static_cast<const uint32_t*>(buf)[i];
    case recclInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case recclUint64: return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
    case recclFloat16: return reduce::halfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case recclBfloat16: return reduce::bfloat16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case recclFloat32: return static_cast<const float*>(buf)[i];
    case recclFloat64: return static_cast<const double*>(buf)[i];
    default: return NAN;
  }
}

// Exact, except avg of floats: within 2 ulp of the type.
inline bool matches(double got, double want, recclDataType_t t, recclRedOp_t op) {
  if (op != recclAvg || !isFloat(t) || want == 0) return got == want;
  int mant = t == recclFloat16 ? 10 : t == recclBfloat16 ? 7 : t == recclFloat32 ? 23 : 52;
  double ulp = std::ldexp(1.0, std::ilogb(want) - mant);
  return std::fabs(got - want) <= 2 * ulp;
}

}  // namespace reccl::test
