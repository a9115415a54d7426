// libFuzzer target: the verbs connection-info record and the peer check.
#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/verbs/conn_info.h"

using namespace reccl::transport::verbs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  auto c = decodeConnInfo(in);
  if (!c.ok()) return 0;
  if (c->qpn > 0xffffff || c->psn > 0xffffff || c->slots == 0 || c->chunkBytes == 0 || c->addr == 0) __builtin_trap();
  std::array<std::byte, kConnInfoBytes> b;
  encodeConnInfo(*c, b);
  auto again = decodeConnInfo(b);
  if (!again.ok() || !(*again == *c)) __builtin_trap();
  ConnInfo mine = *c;
  mine.role = c->role == ConnRole::kSender ? ConnRole::kReceiver : ConnRole::kSender;
  if (!checkPeerInfo(mine, *c).ok()) __builtin_trap();
  (void)describeConnInfo(*c);
  return 0;
}
