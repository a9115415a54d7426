// libFuzzer target: connection hello, hello reply and unique id parsers.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  auto h = reccl::core::decodeHello(in);
  if (h.ok()) {
    (void)reccl::core::acceptHello(*h, 1, 2, h->nranks, 0);
    std::array<std::byte, reccl::core::kHelloBytes> b;
    reccl::core::encodeHello(*h, b);
    auto again = reccl::core::decodeHello(b);
    if (!again.ok() || again->srcRank != h->srcRank || again->shmName != h->shmName) __builtin_trap();
  }
  (void)reccl::core::decodeHelloReply(in);
  (void)reccl::core::decodeUniqueId(in);
  return 0;
}
