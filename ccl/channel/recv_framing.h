// The receive side's exactly-once framing, one for every path type (socket, relay pipe, verbs):
// what a receiver does with the header of a step that arrives on its connection. Decode it,
// judge it against what the port has received (classifyStep: the next step, a duplicate resent
// after a migration, a stale frame from a retired path, or a protocol error), count and drop the
// duplicates and stale ones, and refuse a step beyond the slot window (the sender overran it).
// The caller then reads the payload into the slot (or its direct target) and publishes the step
// (RecvPort::onReceived), or drains a dropped step's payload.
#pragma once

#include <span>
#include <string>

#include "channel/port.h"
#include "channel/step_header.h"
#include "reccl/common/status.h"

namespace reccl::channel {

struct StepArrival {
  enum class Kind { kNext, kDrop, kError };
  Kind kind = Kind::kError;
  StepHeader header;  // kNext, kDrop: the decoded header (its payload follows on a stream)
  Status error;       // kError: why, prefixed with the path's `desc`
};

// `header`: the step's 64-byte header as it arrived. Counts a dropped step in the port's
// env()->duplicateSteps or staleSteps. Any thread that drives the path (one at a time per path).
StepArrival judgeArrival(const RecvPort& port, std::span<const std::byte> header, const std::string& desc);

// A stream receiver's step in hand (a socket, a relay pipe: header, then payload, then the next
// header): what is being read and how much of it has come. The path reads the payload into the
// slot (or its direct target) in kPayload, reads and forgets it in kDrain, and calls done() once
// the step is whole.
struct StepInHand {
  enum class Phase { kHeader, kPayload, kDrain };
  Phase phase = Phase::kHeader;
  StepHeader step{};
  size_t got = 0;   // payload (or drained) bytes of the step so far
  size_t want = 0;  // its payload bytes
  // The step's header arrived: judged (judgeArrival); the next step's payload is to be read
  // (kPayload), a dropped one's drained (kDrain, or straight to the next header when it has
  // none). kError: *error says why, nothing changes.
  StepArrival::Kind begin(const RecvPort& port, std::span<const std::byte> header, const std::string& desc,
                          Status* error);
  void done() noexcept {
    phase = Phase::kHeader;
    got = want = 0;
  }
};

}  // namespace reccl::channel
