// libFuzzer target: what an acceptor or a rank reads first from a stranger: the authenticated
// hello, the acceptor's challenge, the hello reply, the root's frame header and the unique id.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/auth.h"
#include "core/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  auto h = reccl::core::decodeHello(in);
  if (h.ok()) {
    (void)reccl::core::acceptHello(*h, 2, h->nranks, 0);
    std::array<std::byte, reccl::core::kHelloBytes> b;
    reccl::core::encodeHello(*h, b);
    auto again = reccl::core::decodeHello(b);
    if (!again.ok() || again->srcRank != h->srcRank || again->shmName != h->shmName || again->nonce != h->nonce)
      __builtin_trap();
  }
  if (size >= reccl::core::kAuthHelloBytes)
    (void)reccl::core::openAuthHello(in.first(reccl::core::kAuthHelloBytes), reccl::core::Key{}, reccl::core::Nonce{});
  (void)reccl::core::decodeChallenge(in, reccl::core::AuthPurpose::kData);
  (void)reccl::core::decodeHelloReply(in);
  (void)reccl::core::decodeRootFrameHeader(in.first(std::min<size_t>(size, reccl::core::kRootFrameHeaderBytes)), 1 << 20);
  (void)reccl::core::decodeUniqueId(in);
  return 0;
}
