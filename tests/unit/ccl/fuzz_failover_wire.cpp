// libFuzzer target: the failover's messages a rank reads from a peer after the hello: migration
// request and reply, relay open and reply. Whatever decodes re-encodes to the same fields.
#include <cstddef>
#include <cstdint>
#include <span>

#include "failover/migration/migrate_wire.h"
#include "failover/relay/relay_wire.h"

using namespace reccl::failover;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  if (auto r = decodeMigrateRequest(in); r.ok()) {
    std::array<std::byte, kMigrateRequestBytes> b;
    encodeMigrateRequest(*r, b);
    auto again = decodeMigrateRequest(b);
    if (!again.ok() || again->epoch != r->epoch || again->applied != r->applied || again->rail != r->rail)
      __builtin_trap();
  }
  if (auto r = decodeMigrateReply(in); r.ok()) {
    std::array<std::byte, kMigrateReplyBytes> b;
    encodeMigrateReply(*r, b);
    auto again = decodeMigrateReply(b);
    if (!again.ok() || again->epoch != r->epoch || again->received != r->received) __builtin_trap();
  }
  int nranks = size > 0 ? 1 + data[0] % 64 : 1;
  if (auto r = decodeRelayOpen(in, 0, nranks); r.ok()) {
    std::array<std::byte, kRelayOpenBytes> b;
    encodeRelayOpen(*r, b);
    auto again = decodeRelayOpen(b, 0, nranks);
    if (!again.ok() || again->peer != r->peer || again->rail != r->rail) __builtin_trap();
  }
  if (auto r = decodeRelayReply(in); r.ok()) {
    std::array<std::byte, kRelayReplyBytes> b;
    encodeRelayReply(*r, b);
    if (!decodeRelayReply(b).ok()) __builtin_trap();
  }
  return 0;
}
