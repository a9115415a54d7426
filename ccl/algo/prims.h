// Step primitives over one SendPort and/or RecvPort, NCCL-style: each moves at most one slot
// (chunkBytes) and reads/writes the slots directly (the reduction writes into the send slot).
#pragma once

#include <array>
#include <cstddef>
#include <optional>

#include "channel/channel_set.h"
#include "channel/port.h"
#include "reccl/reccl.h"
#include "reduce/reduce.h"

namespace reccl::algo {

struct StepContext {
  channel::CollDesc desc;
  recclDataType_t dtype = recclInt8;
  recclRedOp_t op = recclSum;
  size_t esize = 1;
  reduce::ReduceFn fn = nullptr;
  reduce::Reduce2Fn fn2 = nullptr;  // reduce into dst and the send slot in one pass
  int nranks = 1;
  channel::ChannelSet* cs = nullptr;
  // Steps of at least this many bytes may be received straight into the user's buffer
  // (RECCL_DIRECT_RECV_MIN_BYTES); 0 disables direct receive.
  size_t directMinBytes = 0;
  // Steps of at least this many bytes may be sent straight from the user's buffer by sendUser()
  // (RECCL_DIRECT_SEND_MIN_BYTES); 0 disables direct send.
  size_t directSendMinBytes = 0;
  // A PreMulSum (op == reduce::kPreMulSum): this rank's scalar, one element of dtype. Every `src`
  // that send(), sendUser() and the recvReduce* steps read is then the caller's input, scaled as
  // it is read (reduce::PreMul), so the algorithm sets it only where each of those reads is of the
  // input: the ring allreduce, reduce-scatter and the reduce chain.
  bool preMul = false;
  std::array<std::byte, 8> scalar{};
};

class Prims {
 public:
  Prims(const StepContext& ctx, channel::SendPort* send, channel::RecvPort* recv)
      : c_(ctx), send_(send), recv_(recv) {
    if (ctx.preMul) scale_.emplace(ctx.dtype, ctx.scalar.data());
  }

  // Elements that fit one step.
  size_t chunkElems() const;

  Status send(const void* src, size_t n);
  // send() whose payload the transport may read straight from src (no copy into the slot).
  // The caller guarantees src stays unchanged until the receiver has received the step (for a
  // step whose receipt a later received step implies, anything written to src after that later
  // step arrived is safe) and calls finishDirect() before src may go away.
  Status sendUser(const void* src, size_t n);
  // Waits until the receiver has acked every step sendUser() sent without a copy.
  Status finishDirect();
  Status recv(void* dst, size_t n);
  Status recvReduceSend(const void* src, size_t n);
  Status recvReduceCopy(const void* src, void* dst, size_t n, bool finalize);
  // Reduces into dst and sends the result. Where the transport sends from the caller's memory
  // (sendUser's conditions), the step is sent from dst: the same contract as sendUser (dst
  // unchanged until received, finishDirect() before it may go away).
  Status recvReduceCopySend(const void* src, void* dst, size_t n, bool finalize);
  // Copies the step to dst and forwards it; when it landed at dst directly (expectDirect) it is
  // forwarded from dst under sendUser's contract.
  Status recvCopySend(void* dst, size_t n);
  // Asks the transport to put the payload of the `ahead`-th step received from now (1: the next
  // one) straight at dst, whose n elements that step's recv()/recvCopySend() fills; those then
  // skip their copy out of the slot when it worked. A hint (see RecvPort::expectDirect): call it
  // before the peer can send that step; at most two may be pending.
  void expectDirect(void* dst, size_t n, uint64_t ahead);

 private:
  Deadline deadline() const { return c_.cs->stepDeadline(); }
  Result<std::span<const std::byte>> waitRecv(size_t bytes);
  // Whether a step of `bytes` may be sent from the caller's memory (RECCL_DIRECT_SEND_MIN_BYTES
  // and a transport that sends header and payload as separate pieces).
  bool sendsFromUser(size_t bytes) const;
  // dst = in OP src, src scaled first under a PreMulSum; combine2 also writes the result to dst2.
  void combine(void* dst, const void* in, const void* src, size_t n) const;
  void combine2(void* dst, void* dst2, const void* in, const void* src, size_t n) const;

  const StepContext& c_;
  channel::SendPort* send_;
  channel::RecvPort* recv_;
  std::optional<reduce::PreMul> scale_;  // set under a PreMulSum (StepContext::preMul)
};

}  // namespace reccl::algo
