#include "channel/step_header.h"

#include <cstring>
#include <string>

#include "channel/wire_bytes.h"
#include "reduce/reduce.h"

namespace reccl::channel {
const char* collKindName(CollKind k) noexcept {
  switch (k) {
    case CollKind::kNone: return "none";
    case CollKind::kAllReduce: return "allreduce";
    case CollKind::kBroadcast: return "broadcast";
    case CollKind::kReduce: return "reduce";
    case CollKind::kAllGather: return "allgather";
    case CollKind::kReduceScatter: return "reducescatter";
    case CollKind::kAllToAll: return "alltoall";
    case CollKind::kSendRecv: return "sendrecv";
    case CollKind::kBarrier: return "barrier";
  }
  return "unknown";
}

// Layout: 0 magic u32 | 4 version u16 | 6 flags u16 | 8 epoch u32 | 12 bytes u32 | 16 step u64 |
// 24 seq u64 | 32 count u64 | 40 root i32 | 44 kind u8 | 45 dtype u8 | 46 op u8 | 47..63 zero.
void encodeStepHeader(const StepHeader& h, std::span<std::byte, kStepHeaderBytes> out) noexcept {
  std::byte* p = out.data();
  std::memset(p, 0, kStepHeaderBytes);
  put<uint32_t>(p, 0, kStepMagic);
  put<uint16_t>(p, 4, kWireVersion);
  put<uint16_t>(p, 6, h.flags);
  put<uint32_t>(p, 8, h.epoch);
  put<uint32_t>(p, 12, h.bytes);
  put<uint64_t>(p, 16, h.step);
  put<uint64_t>(p, 24, h.desc.seq);
  put<uint64_t>(p, 32, h.desc.count);
  put<int32_t>(p, 40, h.desc.root);
  put<uint8_t>(p, 44, static_cast<uint8_t>(h.desc.kind));
  put<uint8_t>(p, 45, h.desc.dtype);
  put<uint8_t>(p, 46, h.desc.op);
}

Result<StepHeader> decodeStepHeader(std::span<const std::byte> in) {
  if (in.size() < kStepHeaderBytes)
    return Status(Errc::kProtocol, "step header: short frame of " + std::to_string(in.size()) + " bytes");
  const std::byte* p = in.data();
  if (get<uint32_t>(p, 0) != kStepMagic) return Status(Errc::kProtocol, "step header: bad magic");
  if (get<uint16_t>(p, 4) != kWireVersion)
    return Status(Errc::kProtocol, "step header: unsupported version " + std::to_string(get<uint16_t>(p, 4)));
  StepHeader h;
  h.flags = get<uint16_t>(p, 6);
  h.epoch = get<uint32_t>(p, 8);
  h.bytes = get<uint32_t>(p, 12);
  h.step = get<uint64_t>(p, 16);
  h.desc.seq = get<uint64_t>(p, 24);
  h.desc.count = get<uint64_t>(p, 32);
  h.desc.root = get<int32_t>(p, 40);
  uint8_t kind = get<uint8_t>(p, 44);
  if (kind > static_cast<uint8_t>(CollKind::kMax))
    return Status(Errc::kProtocol, "step header: unknown collective kind " + std::to_string(kind));
  h.desc.kind = static_cast<CollKind>(kind);
  h.desc.dtype = get<uint8_t>(p, 45);
  h.desc.op = get<uint8_t>(p, 46);
  if (h.step == 0) return Status(Errc::kProtocol, "step header: step 0 is never sent");
  return h;
}

void encodeAck(const AckFrame& a, std::span<std::byte, kAckFrameBytes> out) noexcept {
  std::byte* p = out.data();
  std::memset(p, 0, kAckFrameBytes);
  put<uint32_t>(p, 0, kAckMagic);
  put<uint32_t>(p, 4, a.epoch);
  put<uint64_t>(p, 8, a.applied);
  put<uint64_t>(p, 16, ~a.applied);  // cheap integrity check against a desynchronized stream
}

Result<AckFrame> decodeAck(std::span<const std::byte> in) {
  if (in.size() < kAckFrameBytes) return Status(Errc::kProtocol, "ack: short frame");
  const std::byte* p = in.data();
  if (get<uint32_t>(p, 0) != kAckMagic) return Status(Errc::kProtocol, "ack: bad magic");
  AckFrame a;
  a.epoch = get<uint32_t>(p, 4);
  a.applied = get<uint64_t>(p, 8);
  if (get<uint64_t>(p, 16) != ~a.applied) return Status(Errc::kProtocol, "ack: corrupt frame");
  return a;
}

StepVerdict classifyStep(const StepHeader& h, uint64_t received, uint32_t epoch,
                         uint32_t maxBytes) noexcept {
  if (h.bytes > maxBytes) return StepVerdict::kBad;
  if (h.epoch < epoch) return StepVerdict::kStale;
  if (h.epoch > epoch) return StepVerdict::kBad;
  if (h.step <= received) return StepVerdict::kDuplicate;
  if (h.step != received + 1) return StepVerdict::kBad;
  return StepVerdict::kNext;
}

namespace {

// By name, as the application wrote them (nccl-tests' names); a value no type or op has (a
// peer's byte off the wire) by its number, never cast to the enum.
std::string typeText(uint8_t v) {
  return reduce::validType(v) ? std::string(reduce::typeName(static_cast<recclDataType_t>(v))) : std::to_string(v);
}
std::string opText(uint8_t v) {
  return reduce::validOp(v) || v == reduce::kPreMulSum ? std::string(reduce::opName(static_cast<recclRedOp_t>(v)))
                                                        : std::to_string(v);
}

// "broadcast #3 (1000 float, root 1)": a collective as a rank called it.
std::string describe(const CollDesc& d) {
  std::string s = std::string(collKindName(d.kind)) + " #" + std::to_string(d.seq) + " (" + std::to_string(d.count) +
                  " " + typeText(d.dtype);
  if (d.kind == CollKind::kAllReduce || d.kind == CollKind::kReduce || d.kind == CollKind::kReduceScatter)
    s += ", " + opText(d.op);
  if (d.kind == CollKind::kBroadcast || d.kind == CollKind::kReduce) s += ", root " + std::to_string(d.root);
  return s + ")";
}

}  // namespace

Status checkDesc(const CollDesc& mine, const CollDesc& theirs, int peer) {
  if (mine == theirs) return Status::Ok();
  const std::string who = "rank " + std::to_string(peer);
  auto mismatch = [&](const char* what, const std::string& a, const std::string& b) {
    return Status(Errc::kInvalidUsage,
                  "mismatched " + std::string(what) + " across ranks: this rank has " + a + ", " + who + " has " + b);
  };
  // Data of another collective number: a collective the two ranks called differently ended at
  // one of them without the data the other sent (a broadcast whose ranks disagree on the root
  // ends at each rank that took itself for the root: a root only sends). Said by number, as
  // each rank called it, whatever the kinds.
  if (mine.seq != theirs.seq && mine.seq != 0 && theirs.seq != 0) {
    std::string why = "mismatched collective sequence across ranks: this rank is in " + describe(mine) + ", " + who +
                      " sent data of its " + describe(theirs);
    if (theirs.seq < mine.seq)
      why += ", which this rank's collective #" + std::to_string(theirs.seq) +
             " ended without receiving: the ranks called it with different arguments (a root, for one)";
    else
      why += ": " + who + " is past this rank's collective #" + std::to_string(mine.seq) +
             ": the ranks called it with different arguments (a root, for one)";
    return Status(Errc::kInvalidUsage, why);
  }
  if (mine.kind != theirs.kind)
    return mismatch("collective", collKindName(mine.kind), collKindName(theirs.kind));
  if (mine.seq != theirs.seq)
    return mismatch("collective sequence", std::to_string(mine.seq), std::to_string(theirs.seq));
  if (mine.count != theirs.count)
    return mismatch("count", std::to_string(mine.count), std::to_string(theirs.count));
  if (mine.dtype != theirs.dtype) return mismatch("datatype", typeText(mine.dtype), typeText(theirs.dtype));
  if (mine.op != theirs.op) return mismatch("op", opText(mine.op), opText(theirs.op));
  return mismatch("root", std::to_string(mine.root), std::to_string(theirs.root));
}

}  // namespace reccl::channel
