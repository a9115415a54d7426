// How a collective on device buffers is cut into pieces that each fit one pinned staging slot:
// the piece's own collective (run by the host algorithms on the slot), the copies user -> slot
// before it and slot -> user after it. Pure arithmetic, the same on every rank: the cut depends
// on the collective, its count, the type, the rank count and the slot size only (never on where
// a rank's buffers live), so every rank runs the same sequence of piece collectives.
//
// Cuts: allreduce, broadcast and reduce by element ranges (half a slot in, half out);
// allgather, reducescatter and alltoall by ranges of each rank's block (the strided side is one
// 2-D copy, cudaMemcpy2DAsync's shape, or a copy per rank where blocks are more than
// kMaxCopyPitch apart); a group of sends and receives by rounds, round k moving
// chunk k of every operation (slot / kMaxGroupOps bytes each), so peers cut alike whatever else
// their groups hold.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "algo/collective.h"
#include "core/comm.h"
#include "reccl/common/status.h"

namespace reccl::stream {

inline constexpr int kMaxGroupOps = 8;         // sends + receives of one group on one communicator
inline constexpr size_t kStageAlign = 256;     // every region of a slot starts at this alignment
// The largest pitch a 2-D copy is given; rank blocks further apart are copied a row at a time.
inline constexpr size_t kMaxCopyPitch = (size_t{1} << 31) - 1;

// `height` rows of `width` bytes: user rows `userPitch` apart from `userOffset` in user buffer
// `buffer` (0: send, 1: recv; for a group, operation i's buffer is i), slot rows `stagePitch`
// apart from `stageOffset`. Pitches are >= width even for one row.
struct StageCopy {
  int buffer = 0;
  size_t userOffset = 0;
  size_t userPitch = 0;
  size_t stageOffset = 0;
  size_t stagePitch = 0;
  size_t width = 0;
  size_t height = 1;
};

struct PieceP2P {
  bool isSend = false;
  int peer = 0;
  size_t stageOffset = 0;
  size_t count = 0;
  recclDataType_t dtype = recclUint8;
};

struct Piece {
  size_t count = 0;      // the piece collective's count argument
  size_t inOffset = 0;   // its send buffer in the slot
  size_t outOffset = 0;  // its receive buffer in the slot
  std::vector<PieceP2P> p2p;
  std::vector<StageCopy> in;   // user -> slot, before
  std::vector<StageCopy> out;  // slot -> user, after
};

// The pieces of `c` on `rank` of `nranks` with slots of `slotBytes`. kInvalidUsage when a slot
// cannot hold one element of every rank's block, or a group has more than kMaxGroupOps
// operations. A collective of no elements is one piece without copies (it still orders the
// stream and meets the other ranks' calls).
Result<std::vector<Piece>> planPieces(const algo::Collective& c, int rank, int nranks, size_t slotBytes);

// The piece's collective on a slot at `slot` (send, recv and group buffers pointed into it).
algo::Collective pieceCollective(const algo::Collective& c, const Piece& p, std::byte* slot);

// The user buffers a collective's copies index (StageCopy::buffer).
std::vector<std::byte*> userBuffers(const algo::Collective& c);

// Host-side copies (the worker's, for buffers the CPU reaches): toSlot copies user -> slot.
void copyOnHost(const StageCopy& cp, std::byte* user, std::byte* slot, bool toSlot) noexcept;

// The host part of one piece on `slot`: the copies of the buffers the CPU reaches (onGpu[i]
// false) into the slot, the piece's collective through comm.run (which breaks the communicator
// when it fails), the copies out. The stream layer's worker runs it after the GPU's input copies;
// tests run it with every buffer on the host.
Status runPieceOnHost(core::Comm& comm, const algo::Collective& c, const Piece& p,
                      const std::vector<std::byte*>& user, const std::vector<bool>& onGpu, std::byte* slot);

}  // namespace reccl::stream
