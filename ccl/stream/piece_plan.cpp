#include "stream/piece_plan.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "reduce/reduce.h"

namespace reccl::stream {
namespace {

using algo::CollKind;

size_t alignUp(size_t v) { return (v + kStageAlign - 1) / kStageAlign * kStageAlign; }
size_t alignDown(size_t v) { return v / kStageAlign * kStageAlign; }

StageCopy row(int buffer, size_t userOffset, size_t stageOffset, size_t bytes) {
  return StageCopy{buffer, userOffset, bytes, stageOffset, bytes, bytes, 1};
}

// One block of `bytes` from each of nranks rows `userPitch` apart, packed in the slot: one 2-D
// copy, or a copy per row where the rows are further apart than a 2-D copy's pitch may be
// (cudaMemcpy2D refuses a pitch above the device's maximum, 2^31 - 1 bytes on current GPUs).
void addBlocks(std::vector<StageCopy>* to, int buffer, size_t userOffset, size_t userPitch, size_t stageOffset,
               size_t bytes, int nranks) {
  if (userPitch <= kMaxCopyPitch) {
    to->push_back(StageCopy{buffer, userOffset, userPitch, stageOffset, bytes, bytes, static_cast<size_t>(nranks)});
    return;
  }
  for (size_t r = 0; r < static_cast<size_t>(nranks); ++r)
    to->push_back(row(buffer, userOffset + r * userPitch, stageOffset + r * bytes, bytes));
}

Status tooSmall(const algo::Collective& c, int nranks, size_t slotBytes) {
  return Status(Errc::kInvalidUsage, std::string("RECCL_CUDA_CHUNK_BYTES=") + std::to_string(slotBytes) +
                                         " cannot hold one element per rank of a " + algo::collKindName(c.kind) +
                                         " of " + reduce::typeName(c.dtype) + " over " + std::to_string(nranks) +
                                         " ranks");
}

// Allreduce, broadcast, reduce: element ranges, half a slot each way.
Result<std::vector<Piece>> planElementwise(const algo::Collective& c, int rank, size_t slotBytes) {
  const size_t es = reduce::typeSize(c.dtype);
  const size_t half = alignDown(slotBytes / 2);
  const size_t per = half / es;
  if (per == 0) return tooSmall(c, 1, slotBytes);
  const bool hasInput = c.kind != CollKind::kBroadcast || rank == c.root;
  const bool hasOutput = c.kind != CollKind::kReduce || rank == c.root;
  std::vector<Piece> out;
  size_t done = 0;
  do {
    size_t n = std::min(per, c.count - done);
    Piece p;
    p.count = n;
    p.inOffset = 0;
    p.outOffset = half;
    if (n && hasInput) p.in.push_back(row(0, done * es, 0, n * es));
    if (n && hasOutput) p.out.push_back(row(1, done * es, half, n * es));
    out.push_back(std::move(p));
    done += n;
  } while (done < c.count);
  return out;
}

// Allgather, reducescatter, alltoall: the same range of each rank's block per piece.
Result<std::vector<Piece>> planBlocks(const algo::Collective& c, int nranks, size_t slotBytes) {
  const size_t es = reduce::typeSize(c.dtype);
  const size_t nr = static_cast<size_t>(nranks);
  const size_t usable = slotBytes > kStageAlign ? slotBytes - kStageAlign : 0;
  // Elements per rank block per piece: in + out must fit one slot.
  size_t rowsIn = c.kind == CollKind::kAllGather ? 1 : nr;
  size_t rowsOut = c.kind == CollKind::kReduceScatter ? 1 : nr;
  const size_t per = usable / ((rowsIn + rowsOut) * es);
  if (per == 0) return tooSmall(c, nranks, slotBytes);
  const size_t pitch = c.count * es;  // a user buffer's rank blocks are count elements apart
  std::vector<Piece> out;
  size_t done = 0;
  do {
    size_t n = std::min(per, c.count - done);
    size_t w = n * es;
    Piece p;
    p.count = n;
    p.inOffset = 0;
    p.outOffset = alignUp(rowsIn * w);
    if (n) {
      if (rowsIn == 1)
        p.in.push_back(row(0, done * es, 0, w));
      else
        addBlocks(&p.in, 0, done * es, pitch, 0, w, nranks);
      if (rowsOut == 1)
        p.out.push_back(row(1, done * es, p.outOffset, w));
      else
        addBlocks(&p.out, 1, done * es, pitch, p.outOffset, w, nranks);
    }
    out.push_back(std::move(p));
    done += n;
  } while (done < c.count);
  return out;
}

// A group: round k moves chunk k of every operation; operation i owns slot region i.
Result<std::vector<Piece>> planGroup(const algo::Collective& c, size_t slotBytes) {
  if (c.p2p.size() > static_cast<size_t>(kMaxGroupOps))
    return Status(Errc::kInvalidUsage, "a group on device buffers takes at most " + std::to_string(kMaxGroupOps) +
                                           " sends and receives per communicator, this one has " +
                                           std::to_string(c.p2p.size()));
  const size_t region = alignDown(slotBytes / kMaxGroupOps);
  std::vector<size_t> per(c.p2p.size());
  size_t rounds = 1;
  for (size_t i = 0; i < c.p2p.size(); ++i) {
    per[i] = region / reduce::typeSize(c.p2p[i].dtype);
    if (per[i] == 0) return tooSmall(c, 1, slotBytes);
    rounds = std::max(rounds, (c.p2p[i].count + per[i] - 1) / per[i]);
  }
  std::vector<Piece> out;
  for (size_t k = 0; k < rounds; ++k) {
    Piece p;
    for (size_t i = 0; i < c.p2p.size(); ++i) {
      const auto& op = c.p2p[i];
      size_t first = k * per[i];
      // An operation of no elements takes part in the first round only (as it would in one call).
      if (first >= op.count && !(op.count == 0 && k == 0)) continue;
      size_t n = std::min(per[i], op.count - first);
      size_t es = reduce::typeSize(op.dtype);
      size_t at = i * region;
      p.p2p.push_back(PieceP2P{op.isSend, op.peer, at, n, op.dtype});
      if (n) (op.isSend ? p.in : p.out).push_back(row(static_cast<int>(i), first * es, at, n * es));
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

Result<std::vector<Piece>> planPieces(const algo::Collective& c, int rank, int nranks, size_t slotBytes) {
  switch (c.kind) {
    case CollKind::kAllReduce:
    case CollKind::kBroadcast:
    case CollKind::kReduce: return planElementwise(c, rank, slotBytes);
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:
    case CollKind::kAllToAll: return planBlocks(c, nranks, slotBytes);
    case CollKind::kSendRecv: return planGroup(c, slotBytes);
    case CollKind::kBarrier: return std::vector<Piece>(1);
  }
  return Status(Errc::kInternal, "unknown collective kind");
}

algo::Collective pieceCollective(const algo::Collective& c, const Piece& p, std::byte* slot) {
  algo::Collective pc;
  pc.kind = c.kind;
  pc.dtype = c.dtype;
  pc.op = c.op;
  pc.preMul = c.preMul;
  pc.root = c.root;
  pc.count = p.count;
  pc.send = slot + p.inOffset;
  pc.recv = slot + p.outOffset;
  for (const auto& x : p.p2p) pc.p2p.push_back(algo::P2POp{x.isSend, x.peer, slot + x.stageOffset, x.count, x.dtype});
  return pc;
}

std::vector<std::byte*> userBuffers(const algo::Collective& c) {
  if (c.kind == CollKind::kSendRecv) {
    std::vector<std::byte*> b;
    for (const auto& op : c.p2p) b.push_back(static_cast<std::byte*>(op.buf));
    return b;
  }
  return {static_cast<std::byte*>(const_cast<void*>(c.send)), static_cast<std::byte*>(c.recv)};
}

void copyOnHost(const StageCopy& cp, std::byte* user, std::byte* slot, bool toSlot) noexcept {
  for (size_t r = 0; r < cp.height; ++r) {
    std::byte* u = user + cp.userOffset + r * cp.userPitch;
    std::byte* s = slot + cp.stageOffset + r * cp.stagePitch;
    if (toSlot)
      std::memcpy(s, u, cp.width);
    else
      std::memcpy(u, s, cp.width);
  }
}

Status runPieceOnHost(core::Comm& comm, const algo::Collective& c, const Piece& p,
                      const std::vector<std::byte*>& user, const std::vector<bool>& onGpu, std::byte* slot) {
  for (const StageCopy& cp : p.in)
    if (!onGpu[static_cast<size_t>(cp.buffer)]) copyOnHost(cp, user[static_cast<size_t>(cp.buffer)], slot, true);
  const algo::Collective pc = pieceCollective(c, p, slot);
  RECCL_TRY(comm.run([&] { return algo::run(comm, pc); }));
  for (const StageCopy& cp : p.out)
    if (!onGpu[static_cast<size_t>(cp.buffer)]) copyOnHost(cp, user[static_cast<size_t>(cp.buffer)], slot, false);
  return Status::Ok();
}

}  // namespace reccl::stream
