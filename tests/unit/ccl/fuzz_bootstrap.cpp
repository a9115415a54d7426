// libFuzzer target: bootstrap records (one rank's info, the root's table).
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  auto r = reccl::core::decodeRankInfo(in);
  if (r.ok()) {
    auto b = reccl::core::encodeRankInfo(*r);
    auto again = reccl::core::decodeRankInfo(b);
    if (!again.ok() || again->nics.size() != r->nics.size()) __builtin_trap();
  }
  if (size > 0) (void)reccl::core::decodeRankTable(in.subspan(1), 1 + data[0] % 8);
  return 0;
}
