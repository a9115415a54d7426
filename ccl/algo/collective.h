// One collective call as data: what the C API was asked, so that the API layer runs it, the
// stream layer (ccl/stream/) re-targets it at staging buffers piece by piece, and tests build
// it, all through one dispatcher instead of a lambda per call site.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "algo/collectives.h"

namespace reccl::algo {

enum class CollKind { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv, kBarrier };

const char* collKindName(CollKind k) noexcept;  // "allreduce", ...

struct Collective {
  CollKind kind = CollKind::kBarrier;
  const void* send = nullptr;
  void* recv = nullptr;
  // The API's count argument: elements per rank for allgather (sendcount), reducescatter
  // (recvcount) and alltoall (to each peer).
  size_t count = 0;
  recclDataType_t dtype = recclUint8;
  recclRedOp_t op = recclSum;
  int root = 0;
  std::vector<P2POp> p2p;  // kSendRecv: the group's sends and receives on this communicator
  // op == reduce::kPreMulSum: this rank's scalar (one element of dtype), read when the collective
  // runs from `at` when set (recclScalarDevice: the caller's memory), else from `value`.
  struct PreMul {
    std::array<std::byte, 8> value{};
    const void* at = nullptr;
  } preMul;
};

// Runs it with the algorithms of collectives.h (arguments already validated by the API).
Status run(channel::ChannelSet& cs, const Collective& c);

}  // namespace reccl::algo
