// libFuzzer target: bootstrap records (one rank's info, the root's table, a block of ranks) and
// the root frames' header.
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
    if (!again.ok() || again->nics.size() != r->nics.size() || again->homeRail != r->homeRail) __builtin_trap();
  }
  if (size > 0) (void)reccl::core::decodeRankTable(in.subspan(1), 1 + data[0] % 8);
  if (size > 1) (void)reccl::core::decodeRankBlock(in.subspan(2), data[0], 1 + data[1] % 8);
  if (size >= reccl::core::kRootFrameHeaderBytes)
    (void)reccl::core::decodeRootFrameHeader(in.first(reccl::core::kRootFrameHeaderBytes), 1 << 20);
  return 0;
}
