// Fixed-offset little-endian fields of reccl's wire messages (step headers, connection hellos,
// bootstrap records, migration requests). One definition, so every parser reads bytes alike.
#pragma once

#include <bit>
#include <cstddef>
#include <cstring>

namespace reccl::channel {

static_assert(std::endian::native == std::endian::little, "wire format is little-endian");

template <typename T>
inline void put(std::byte* p, size_t off, T v) noexcept {
  std::memcpy(p + off, &v, sizeof(T));
}
template <typename T>
inline T get(const std::byte* p, size_t off) noexcept {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}

}  // namespace reccl::channel
