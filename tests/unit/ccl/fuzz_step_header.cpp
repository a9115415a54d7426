// libFuzzer target: step header and ack parsers, the exactly-once verdict, descriptor checks.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "channel/step_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  auto h = reccl::channel::decodeStepHeader(in);
  if (h.ok()) {
    uint64_t received = size > 64 ? data[64] : 0;
    auto v = reccl::channel::classifyStep(*h, received, 1, 1 << 20);
    if (v == reccl::channel::StepVerdict::kNext && h->step != received + 1) __builtin_trap();
    if (v == reccl::channel::StepVerdict::kDuplicate && h->step > received) __builtin_trap();
    (void)reccl::channel::checkDesc(h->desc, reccl::channel::CollDesc{}, 1);
    std::array<std::byte, reccl::channel::kStepHeaderBytes> b;
    reccl::channel::encodeStepHeader(*h, b);
    auto again = reccl::channel::decodeStepHeader(b);
    if (!again.ok() || again->step != h->step || !(again->desc == h->desc)) __builtin_trap();
  }
  (void)reccl::channel::decodeAck(in);
  return 0;
}
