// Collective algorithms, written only against channel::ChannelSet and its ports.
// Arguments are validated by the API layer; these assume valid, non-overflowing input.
#pragma once

#include <cstddef>
#include <span>

#include "channel/channel_set.h"
#include "reccl/reccl.h"

namespace reccl::algo {

// The reductions take op == reduce::kPreMulSum with preMulScalar, this rank's scalar (one element
// of dtype): every element of the input is multiplied by it where the algorithm reads it.

// Ring (reduce-scatter + all-gather, pipelined per chunk, channels in parallel) or recursive
// doubling for small messages (RECCL_SMALL_MSG_BYTES, RECCL_ALGO).
Status allReduce(channel::ChannelSet& cs, const void* sendbuff, void* recvbuff, size_t count,
                 recclDataType_t dtype, recclRedOp_t op, const std::byte* preMulScalar = nullptr);
// Whether allReduce moves `bytes` by recursive doubling (else the ring); algo/cost.h prices the same choice.
bool allReduceByDoubling(const channel::ChannelSet& cs, size_t bytes);
Status allGather(channel::ChannelSet& cs, const void* sendbuff, void* recvbuff, size_t sendcount,
                 recclDataType_t dtype);
Status reduceScatter(channel::ChannelSet& cs, const void* sendbuff, void* recvbuff, size_t recvcount,
                     recclDataType_t dtype, recclRedOp_t op, const std::byte* preMulScalar = nullptr);
// Pipelined chain root -> root+1 -> ... -> root-1.
Status broadcast(channel::ChannelSet& cs, const void* sendbuff, void* recvbuff, size_t count,
                 recclDataType_t dtype, int root);
// Pipelined chain root+1 -> ... -> root-1 -> root.
Status reduce(channel::ChannelSet& cs, const void* sendbuff, void* recvbuff, size_t count,
              recclDataType_t dtype, recclRedOp_t op, int root, const std::byte* preMulScalar = nullptr);
// Pairwise exchange: in step k, send to rank+k and receive from rank-k.
Status allToAll(channel::ChannelSet& cs, const void* sendbuff, void* recvbuff, size_t count,
                recclDataType_t dtype);
Status barrier(channel::ChannelSet& cs);

struct P2POp {
  bool isSend = false;
  int peer = 0;
  void* buf = nullptr;
  size_t count = 0;
  recclDataType_t dtype = recclInt8;
};
// Sends and receives of one group, progressed together (no ordering deadlock).
Status sendRecv(channel::ChannelSet& cs, std::span<const P2POp> ops);
// A group's sends to self and receives from self pair up in order, each pair of one count and
// type (sendRecv copies them); the API checks it before anything runs, so that a misuse is a
// refused call, not a failed communicator.
Status checkSelfPairs(std::span<const P2POp> ops, int rank);

}  // namespace reccl::algo
