// The collectives reccl-bench measures and their nccl-tests conventions: the element counts
// each rank passes, where in-place buffers sit, and the bus-bandwidth factor.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "reccl/reccl.h"

namespace reccl::bench {

enum class Coll { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAllToAll, kSendRecv, kGather, kScatter };
inline constexpr Coll kAllColls[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast,
                                     Coll::kReduce,    Coll::kAllToAll,  Coll::kSendRecv,      Coll::kGather,
                                     Coll::kScatter};

const char* collName(Coll c) noexcept;  // "allreduce", ...
// nccl-tests' op names: reccl's, and "mulsum" for the pre-multiplied sum (reduce::kPreMulSum,
// made per call with recclRedOpCreatePreMulSum: call_op.h).
const char* opName(recclRedOp_t op) noexcept;
// Accepts our names, nccl-tests' names with or without "_perf" ("all_reduce_perf") and
// NCCL's ("reduce_scatter", "bcast").
std::optional<Coll> parseColl(std::string_view name) noexcept;

bool collReduces(Coll c) noexcept;    // takes a reduction op
bool collHasRoot(Coll c) noexcept;    // broadcast, reduce, gather, scatter
bool collHasInPlace(Coll c) noexcept;  // alltoall and sendrecv have no in-place form
// The roots a row set runs with: {-1} for collectives without one, else -r's rank, or every rank
// in turn for -r -1.
std::vector<int> rootsOf(Coll c, int rootOption, int nranks);

// nccl-tests' factor from algorithm bandwidth to bus bandwidth.
double busBwFactor(Coll c, int nranks) noexcept;

// Buffers of one rank for a row whose "count" column is `count` elements (nccl-tests: the total
// for allgather/reducescatter/alltoall/gather/scatter, already a multiple of nranks).
struct Shape {
  size_t count = 0;       // the table's count column
  size_t paramCount = 0;  // the count argument of the API call
  size_t sendCount = 0;   // elements in the send buffer
  size_t recvCount = 0;   // elements in the receive buffer
  // In place: the send buffer is recv + inPlaceSendOffset (allgather, gather), or the receive
  // buffer is send + inPlaceRecvOffset (reducescatter, scatter); other collectives use one buffer
  // for both.
  size_t inPlaceSendOffset = 0;
  size_t inPlaceRecvOffset = 0;
};
// Rounds count down to what the collective can take with nranks ranks.
size_t roundCount(Coll c, size_t count, int nranks) noexcept;
Shape shapeFor(Coll c, size_t count, int nranks, int rank) noexcept;

}  // namespace reccl::bench
