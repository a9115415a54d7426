// libFuzzer target: the daemon's request decoder and the client's event decoder. Neither may
// crash or throw on any input; an event that decodes must survive encode -> decode unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "reccl/detector/daemon_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto req = reccl::detector::decodeRequest(text);
  if (req.ok() && req->op == reccl::detector::DaemonOp::kWatch &&
      req->watch.netns.size() > reccl::detector::kDaemonMaxNetnsLabel)
    __builtin_trap();  // a label over the limit passed
  auto e = reccl::detector::eventFromJson(text);
  if (e.ok()) {
    auto again = reccl::detector::eventFromJson(reccl::detector::eventToJson(*e));
    if (!again.ok() || again->type != e->type || !(again->link == e->link) || again->ifname != e->ifname ||
        again->signalNs != e->signalNs || again->flaps != e->flaps)
      __builtin_trap();
  }
  return 0;
}
