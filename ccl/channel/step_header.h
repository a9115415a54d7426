// Wire format of one step on a directed connection, and of the receiver's acknowledgement.
// Pure functions over byte spans (fuzzed in tests/unit/ccl/fuzz_step_header.cpp). Little-endian.
//
// Every step carries {step, epoch, bytes} plus the descriptor of the collective it belongs to, so
// the receiver can (a) apply each step exactly once (step numbers), (b) reject frames from a
// retired path (epoch) and (c) detect ranks that called mismatched collectives (descriptor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "reccl/common/status.h"

namespace reccl::channel {

inline constexpr uint32_t kStepMagic = 0x50545352;  // "RSTP"
inline constexpr uint32_t kAckMagic = 0x4b435352;   // "RSCK"
inline constexpr uint16_t kWireVersion = 1;
inline constexpr size_t kStepHeaderBytes = 64;
inline constexpr size_t kAckFrameBytes = 24;

enum class CollKind : uint8_t {
  kNone = 0,
  kAllReduce = 1,
  kBroadcast = 2,
  kReduce = 3,
  kAllGather = 4,
  kReduceScatter = 5,
  kAllToAll = 6,
  kSendRecv = 7,
  kBarrier = 8,
  kMax = 8,
};
const char* collKindName(CollKind k) noexcept;

// What a collective is, as every participating rank must agree on it.
struct CollDesc {
  uint64_t seq = 0;    // per-communicator collective number (0 for point-to-point)
  uint64_t count = 0;  // element count as passed by the caller
  int32_t root = -1;
  CollKind kind = CollKind::kNone;
  uint8_t dtype = 0;
  uint8_t op = 0;
  bool operator==(const CollDesc&) const = default;
};

// StepHeader::flags. Unknown bits are ignored by receivers.
// The sender will wait for this step's acknowledgement (a direct step, whose payload lives in the
// caller's memory until acked): a receiver that batches acks acknowledges it once applied.
inline constexpr uint16_t kStepFlagAckNow = 1;

struct StepHeader {
  uint64_t step = 0;   // 1-based sequence number of this step on its connection
  uint32_t epoch = 0;  // path generation; bumped by every migration
  uint32_t bytes = 0;  // payload bytes following the header
  uint16_t flags = 0;  // kStepFlag*
  CollDesc desc;
};

struct AckFrame {
  uint32_t epoch = 0;
  uint64_t applied = 0;  // receiver applied steps 1..applied; their slots may be reused
};

void encodeStepHeader(const StepHeader& h, std::span<std::byte, kStepHeaderBytes> out) noexcept;
// The epoch field of an encoded header (failover re-stamps resent steps with the new epoch).
inline constexpr size_t kStepEpochOffset = 8;
inline uint32_t frameEpoch(std::span<const std::byte> frame) noexcept {
  uint32_t e;
  __builtin_memcpy(&e, frame.data() + kStepEpochOffset, sizeof(e));
  return e;
}
inline void stampFrameEpoch(std::byte* frame, uint32_t epoch) noexcept {
  __builtin_memcpy(frame + kStepEpochOffset, &epoch, sizeof(epoch));
}
// Fails (kProtocol) on short input, bad magic/version, unknown kind.
Result<StepHeader> decodeStepHeader(std::span<const std::byte> in);

void encodeAck(const AckFrame& a, std::span<std::byte, kAckFrameBytes> out) noexcept;
Result<AckFrame> decodeAck(std::span<const std::byte> in);

// How a receiver treats an arriving step given what it has already received on the connection.
enum class StepVerdict { kNext, kDuplicate, kStale, kBad };
StepVerdict classifyStep(const StepHeader& h, uint64_t received, uint32_t epoch,
                         uint32_t maxBytes) noexcept;

// Ok when both sides run the same collective; otherwise an error naming the argument that differs.
Status checkDesc(const CollDesc& mine, const CollDesc& theirs, int peer);

}  // namespace reccl::channel
