#include "channel/recv_framing.h"

namespace reccl::channel {

StepArrival judgeArrival(const RecvPort& port, std::span<const std::byte> header, const std::string& desc) {
  StepArrival a;
  auto h = decodeStepHeader(header);
  if (!h.ok()) {
    a.error = h.status().Wrap(desc);
    return a;
  }
  a.header = *h;
  const StepHeader& s = a.header;
  StepVerdict v = classifyStep(s, port.received(), port.epoch(), static_cast<uint32_t>(port.chunkBytes()));
  if (v == StepVerdict::kBad) {
    a.error = Status(Errc::kProtocol, desc + ": unexpected step " + std::to_string(s.step) + " epoch " +
                                          std::to_string(s.epoch) + " (" + std::to_string(s.bytes) + " bytes)");
    return a;
  }
  if (v != StepVerdict::kNext) {
    // Exactly once: a step already received, or one from a retired path, is read and dropped.
    if (auto* env = port.env()) (v == StepVerdict::kDuplicate ? env->duplicateSteps : env->staleSteps).fetch_add(1);
    a.kind = StepArrival::Kind::kDrop;
    return a;
  }
  if (s.step > port.applied() + port.slots()) {
    a.error = Status(Errc::kProtocol, desc + ": sender overran the slot window");
    return a;
  }
  a.kind = StepArrival::Kind::kNext;
  return a;
}

StepArrival::Kind StepInHand::begin(const RecvPort& port, std::span<const std::byte> header, const std::string& desc,
                                    Status* error) {
  StepArrival a = judgeArrival(port, header, desc);
  if (a.kind == StepArrival::Kind::kError) {
    *error = std::move(a.error);
    return a.kind;
  }
  step = a.header;
  got = 0;
  want = step.bytes;
  if (a.kind == StepArrival::Kind::kDrop)
    phase = want ? Phase::kDrain : Phase::kHeader;
  else
    phase = Phase::kPayload;
  return a.kind;
}

}  // namespace reccl::channel
