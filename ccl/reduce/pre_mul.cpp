// preMultiply (reduce.h): a PreMulSum's first pass, each element times the rank's scalar.
#include <cstring>
#include <type_traits>

#include "reduce/reduce.h"
#include "reduce/scalar_ops.h"

namespace reccl::reduce {
namespace {

template <class T>
T load(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const std::byte*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void store(void* p, size_t i, T v) {
  std::memcpy(static_cast<std::byte*>(p) + i * sizeof(T), &v, sizeof(T));
}

// Integers multiply modulo 2^bits, as the device does: through the unsigned type, which wraps
// where signed overflow would be undefined.
template <class T>
void mulInts(const void* in, void* out, size_t count, const void* scalar) {
  using U = std::make_unsigned_t<T>;
  const U s = static_cast<U>(load<T>(scalar, 0));
  for (size_t i = 0; i < count; ++i) store<T>(out, i, static_cast<T>(static_cast<U>(static_cast<U>(load<T>(in, i)) * s)));
}

template <class T>
void mulFloats(const void* in, void* out, size_t count, const void* scalar) {
  const T s = load<T>(scalar, 0);
  for (size_t i = 0; i < count; ++i) store<T>(out, i, load<T>(in, i) * s);
}

// Half and bfloat16: the product of two of them is exact in float32 (11- or 8-bit significands),
// so one rounding on store gives the correctly rounded product, as a native multiply would.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void mulHalves(const void* in, void* out, size_t count, const void* scalar) {
  const float s = ToFloat(load<uint16_t>(scalar, 0));
  for (size_t i = 0; i < count; ++i) store<uint16_t>(out, i, FromFloat(ToFloat(load<uint16_t>(in, i)) * s));
}

}  // namespace

void preMultiply(const void* in, void* out, size_t count, recclDataType_t type, const void* scalar) noexcept {
  switch (type) {
    case recclInt8: return mulInts<int8_t>(in, out, count, scalar);
    case recclUint8: return mulInts<uint8_t>(in, out, count, scalar);
    case recclInt32: return mulInts<int32_t>(in, out, count, scalar);
    case recclUint32: return mulInts<uint32_t>(in, out, count, scalar);
    case recclInt64: return mulInts<int64_t>(in, out, count, scalar);
    case recclUint64: return mulInts<uint64_t>(in, out, count, scalar);
    case recclFloat16: return mulHalves<detail::halfToFloatScalar, detail::floatToHalfScalar>(in, out, count, scalar);
    case recclBfloat16: return mulHalves<detail::bf16ToFloatScalar, detail::floatToBf16Scalar>(in, out, count, scalar);
    case recclFloat32: return mulFloats<float>(in, out, count, scalar);
    case recclFloat64: return mulFloats<double>(in, out, count, scalar);
    default: return;
  }
}

}  // namespace reccl::reduce
