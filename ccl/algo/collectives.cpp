#include "algo/collectives.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#include "algo/prims.h"
#include "reduce/reduce.h"

namespace reccl::algo {
namespace {

using channel::CollKind;

StepContext makeContext(channel::ChannelSet& cs, CollKind kind, size_t count, recclDataType_t dtype,
                        recclRedOp_t op, int root, const std::byte* preMulScalar = nullptr) {
  StepContext c;
  c.desc.seq = cs.nextCollSeq();
  c.desc.count = count;
  c.desc.root = root;
  c.desc.kind = kind;
  c.desc.dtype = static_cast<uint8_t>(dtype);
  c.desc.op = static_cast<uint8_t>(op);
  c.dtype = dtype;
  c.op = op;
  c.esize = reduce::typeSize(dtype);
  c.fn = reduce::kernel(dtype, reduce::kernelOp(op));
  c.fn2 = reduce::kernel2(dtype, reduce::kernelOp(op));
  c.nranks = cs.nranks();
  c.cs = &cs;
  c.directMinBytes = cs.directRecvMinBytes();
  c.directSendMinBytes = cs.directSendMinBytes();
  if (op == reduce::kPreMulSum && preMulScalar) {
    c.preMul = true;
    std::memcpy(c.scalar.data(), preMulScalar, c.esize);
  }
  return c;
}

const std::byte* cb(const void* p, size_t elems, size_t esize) {
  return static_cast<const std::byte*>(p) + elems * esize;
}
std::byte* b(void* p, size_t elems, size_t esize) { return static_cast<std::byte*>(p) + elems * esize; }

inline int mod(int a, int n) { return ((a % n) + n) % n; }

// Splits [0, count) into `parts` contiguous ranges aligned to `align` elements.
struct Range {
  size_t off = 0;
  size_t len = 0;
};
Range partRange(size_t count, int parts, int i, size_t align) {
  size_t per = (count + parts - 1) / parts;
  per = (per + align - 1) / align * align;
  size_t off = std::min(count, per * i);
  return {off, std::min(per, count - off)};
}

// Channels used for `bytes` of traffic: no more than one per 64 KiB, so small messages keep
// their latency on one channel.
int channelsFor(channel::ChannelSet& cs, size_t bytes) {
  size_t want = bytes / (64 * 1024);
  return static_cast<int>(std::clamp<size_t>(want, 1, static_cast<size_t>(cs.nchannels())));
}

Status copyIfNeeded(const void* src, void* dst, size_t bytes) {
  if (src != dst && bytes) std::memmove(dst, src, bytes);
  return Status::Ok();
}

// The input into the output as it is, or scaled under a PreMulSum (in place too): the start of the
// algorithms that work on the output alone (one rank, recursive doubling).
Status copyInput(const StepContext& c, const void* src, void* dst, size_t count) {
  if (!c.preMul) return copyIfNeeded(src, dst, count * c.esize);
  if (count) reduce::PreMul(c.dtype, c.scalar.data()).scale(dst, src, count);
  return Status::Ok();
}

struct RingPorts {
  channel::SendPort* send = nullptr;
  channel::RecvPort* recv = nullptr;
};
Result<RingPorts> ringPorts(channel::ChannelSet& cs, int ch) {
  int n = cs.nranks(), r = cs.rank();
  RingPorts p;
  RECCL_ASSIGN_OR_RETURN(p.send, cs.sendPort(mod(r + 1, n), ch));
  RECCL_ASSIGN_OR_RETURN(p.recv, cs.recvPort(mod(r - 1, n), ch));
  return p;
}

// One channel's share of a ring allreduce over elements [part.off, part.off + part.len).
Status ringAllReduceChannel(channel::ChannelSet& cs, const StepContext& c, int ch, const void* sendbuff,
                            void* recvbuff, Range part) {
  int n = cs.nranks(), r = cs.rank();
  RECCL_ASSIGN_OR_RETURN(auto ports, ringPorts(cs, ch));
  Prims p(c, ports.send, ports.recv);
  size_t chunk = p.chunkElems();
  size_t blockLen = (part.len + n - 1) / n;
  size_t rounds = std::max<size_t>(1, (blockLen + chunk - 1) / chunk);
  bool avg = c.op == recclAvg;
  const void* in = sendbuff;
  // Elements of block `blk` in round `round`.
  auto seg = [&](size_t round, int blk, size_t* off) {
    size_t bstart = static_cast<size_t>(blk) * blockLen;
    size_t bend = std::min(part.len, bstart + blockLen);
    size_t s = std::min(bend, bstart + round * chunk);
    size_t e = std::min(bend, s + chunk);
    if (bstart >= part.len) s = e = part.len;
    *off = part.off + s;
    return e - s;
  };
  // A round's first step: it needs nothing received, so it is posted one round early (before
  // the previous round's last receive) and the link has the next round's data while this rank
  // waits for the previous round's end. The order of steps on the connection is unchanged.
  // The round's last step (block r + 1, fully reduced) goes straight to the output: named here,
  // before the peer can send it (it needs this rank's first step of that round). `ahead` counts
  // the steps received before it from now.
  // The first step is sent from the input itself (no copy into the slot). Its bytes must stay
  // as they are until rank r + 1 has received the step. Out of place nothing writes the input.
  // In place, the only later write to these elements (block r - 1 of that round) is the
  // all-gather step that brings block r - 1 back fully reduced: recvCopySend (n > 2) or the
  // round's last recv (n = 2, where r + 1 = r - 1), whose payload exists only after rank r + 1
  // received this step and passed on its partial sum. A resend after a failover starts at the
  // peer's received step + 1, so it never needs these bytes once they are overwritten.
  // The fully reduced block r is sent from the output too (recvReduceCopySend): nothing in this
  // collective writes block r again (the all-gather writes blocks r - 1 .. r + 2 - n and r + 1),
  // and finishDirect() below keeps it mapped until the peer has acked it.
  auto startRound = [&](size_t round, uint64_t ahead) -> Status {
    size_t off;
    size_t len = seg(round, mod(r + 1, n), &off);
    p.expectDirect(b(recvbuff, off, c.esize), len, ahead);
    len = seg(round, mod(r - 1, n), &off);
    return p.sendUser(cb(in, off, c.esize), len);
  };
  RECCL_TRY(startRound(0, 2 * static_cast<uint64_t>(n) - 2));
  for (size_t round = 0; round < rounds; ++round) {
    size_t off, len;
    for (int k = 1; k <= n - 2; ++k) {
      len = seg(round, mod(r - 1 - k, n), &off);
      RECCL_TRY(p.recvReduceSend(cb(in, off, c.esize), len));
    }
    len = seg(round, r, &off);
    RECCL_TRY(p.recvReduceCopySend(cb(in, off, c.esize), b(recvbuff, off, c.esize), len, avg));
    for (int j = 0; j <= n - 3; ++j) {
      len = seg(round, mod(r - 1 - j, n), &off);
      RECCL_TRY(p.recvCopySend(b(recvbuff, off, c.esize), len));
    }
    // Next round's target: after this round's last step (1) and its own 2n-2 steps.
    if (round + 1 < rounds) RECCL_TRY(startRound(round + 1, 2 * static_cast<uint64_t>(n) - 1));
    len = seg(round, mod(r + 1, n), &off);
    RECCL_TRY(p.recv(b(recvbuff, off, c.esize), len));
  }
  // The input may go away once this returns: no resend may read it afterwards.
  return p.finishDirect();
}

// Exchanges `count` elements of buf with peer and reduces what arrives into buf, chunk by chunk.
Status exchangeReduce(channel::ChannelSet& cs, const StepContext& c, int peer, void* buf, size_t count) {
  RECCL_ASSIGN_OR_RETURN(auto* sp, cs.sendPort(peer, 0));
  RECCL_ASSIGN_OR_RETURN(auto* rp, cs.recvPort(peer, 0));
  Prims p(c, sp, rp);
  size_t chunk = p.chunkElems();
  size_t off = 0;
  do {
    size_t len = std::min(chunk, count - off);
    RECCL_TRY(p.send(cb(buf, off, c.esize), len));
    Prims rx(c, nullptr, rp);
    RECCL_TRY(rx.recvReduceCopy(cb(buf, off, c.esize), b(buf, off, c.esize), len, false));
    off += len;
  } while (off < count);
  return Status::Ok();
}

Status sendAll(channel::ChannelSet& cs, const StepContext& c, int peer, const void* buf, size_t count) {
  RECCL_ASSIGN_OR_RETURN(auto* sp, cs.sendPort(peer, 0));
  Prims p(c, sp, nullptr);
  size_t chunk = p.chunkElems(), off = 0;
  do {
    size_t len = std::min(chunk, count - off);
    RECCL_TRY(p.send(cb(buf, off, c.esize), len));
    off += len;
  } while (off < count);
  return Status::Ok();
}

Status recvAll(channel::ChannelSet& cs, const StepContext& c, int peer, void* buf, size_t count, bool reduceInto) {
  RECCL_ASSIGN_OR_RETURN(auto* rp, cs.recvPort(peer, 0));
  Prims p(c, nullptr, rp);
  size_t chunk = p.chunkElems(), off = 0;
  do {
    size_t len = std::min(chunk, count - off);
    if (reduceInto)
      RECCL_TRY(p.recvReduceCopy(cb(buf, off, c.esize), b(buf, off, c.esize), len, false));
    else
      RECCL_TRY(p.recv(b(buf, off, c.esize), len));
    off += len;
  } while (off < count);
  return Status::Ok();
}

// Recursive doubling; ranks beyond the largest power of two fold into a partner first.
Status rdAllReduce(channel::ChannelSet& cs, const StepContext& c, void* buf, size_t count) {
  int n = cs.nranks(), r = cs.rank();
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  int rem = n - pow2;
  int newRank;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      RECCL_TRY(sendAll(cs, c, r + 1, buf, count));
      newRank = -1;
    } else {
      RECCL_TRY(recvAll(cs, c, r - 1, buf, count, true));
      newRank = r / 2;
    }
  } else {
    newRank = r - rem;
  }
  if (newRank >= 0) {
    for (int mask = 1; mask < pow2; mask <<= 1) {
      int np = newRank ^ mask;
      int peer = np < rem ? np * 2 + 1 : np + rem;
      RECCL_TRY(exchangeReduce(cs, c, peer, buf, count));
    }
    if (c.op == recclAvg) reduce::finalizeAvg(buf, count, c.dtype, n);
  }
  if (r < 2 * rem) {
    if (r % 2 == 1)
      RECCL_TRY(sendAll(cs, c, r - 1, buf, count));
    else
      RECCL_TRY(recvAll(cs, c, r + 1, buf, count, false));
  }
  return Status::Ok();
}

// A chain along the ring (broadcast, reduce): each channel's part of `count`, a chunk at a time,
// `step(p, off, len)` moving one chunk at this rank's place in the chain.
template <class Step>
Status chainChunks(channel::ChannelSet& cs, const StepContext& c, size_t count, Step step) {
  int nch = channelsFor(cs, count * c.esize);
  return cs.runParallel(nch, [=, &cs](int ch) -> Status {
    Range part = partRange(count, nch, ch, 16);
    RECCL_ASSIGN_OR_RETURN(auto ports, ringPorts(cs, ch));
    Prims p(c, ports.send, ports.recv);
    size_t chunk = p.chunkElems();
    size_t off = part.off, end = part.off + part.len;
    do {
      size_t len = std::min(chunk, end - off);
      RECCL_TRY(step(p, off, len));
      off += len;
    } while (off < end);
    return p.finishDirect();  // recvCopySend may forward from the output (see prims.h)
  });
}

}  // namespace

bool allReduceByDoubling(const channel::ChannelSet& cs, size_t bytes) {
  const std::string_view forced = cs.forcedAlgo();
  return forced == "rd" || (forced.empty() && bytes <= cs.smallMessageBytes());
}

Status allReduce(channel::ChannelSet& cs, const void* sendbuff, void* recvbuff, size_t count,
                 recclDataType_t dtype, recclRedOp_t op, const std::byte* preMulScalar) {
  if (count == 0) return Status::Ok();
  StepContext c = makeContext(cs, CollKind::kAllReduce, count, dtype, op, -1, preMulScalar);
  int n = cs.nranks();
  size_t bytes = count * c.esize;
  if (n == 1) return copyInput(c, sendbuff, recvbuff, count);
  if (allReduceByDoubling(cs, bytes)) {
    RECCL_TRY(copyInput(c, sendbuff, recvbuff, count));
    c.preMul = false;  // what recursive doubling sends from here on are partial sums
    return rdAllReduce(cs, c, recvbuff, count);
  }
  int nch = channelsFor(cs, bytes);
  return cs.runParallel(nch, [=, &cs](int ch) {
    Range part = partRange(count, nch, ch, 16);
    return ringAllReduceChannel(cs, c, ch, sendbuff, recvbuff, part);
  });
}

Status reduceScatter(channel::ChannelSet& cs, const void* sendbuff, void* recvbuff, size_t recvcount,
                     recclDataType_t dtype, recclRedOp_t op, const std::byte* preMulScalar) {
  if (recvcount == 0) return Status::Ok();
  StepContext c = makeContext(cs, CollKind::kReduceScatter, recvcount, dtype, op, -1, preMulScalar);
  int n = cs.nranks(), r = cs.rank();
  if (n == 1) return copyInput(c, sendbuff, recvbuff, recvcount);
  int nch = channelsFor(cs, recvcount * c.esize * n);
  return cs.runParallel(nch, [=, &cs](int ch) -> Status {
    Range part = partRange(recvcount, nch, ch, 16);
    RECCL_ASSIGN_OR_RETURN(auto ports, ringPorts(cs, ch));
    Prims p(c, ports.send, ports.recv);
    size_t chunk = p.chunkElems();
    size_t rounds = std::max<size_t>(1, (part.len + chunk - 1) / chunk);
    for (size_t round = 0; round < rounds; ++round) {
      size_t s = std::min(part.len, round * chunk);
      size_t len = std::min(chunk, part.len - s);
      auto at = [&](int blk) { return static_cast<size_t>(blk) * recvcount + part.off + s; };
      RECCL_TRY(p.send(cb(sendbuff, at(mod(r - 1, n)), c.esize), len));
      for (int k = 1; k <= n - 2; ++k) RECCL_TRY(p.recvReduceSend(cb(sendbuff, at(mod(r - 1 - k, n)), c.esize), len));
      RECCL_TRY(p.recvReduceCopy(cb(sendbuff, at(r), c.esize), b(recvbuff, part.off + s, c.esize), len,
                                 op == recclAvg));
    }
    return Status::Ok();
  });
}

Status allGather(channel::ChannelSet& cs, const void* sendbuff, void* recvbuff, size_t sendcount,
                 recclDataType_t dtype) {
  if (sendcount == 0) return Status::Ok();
  StepContext c = makeContext(cs, CollKind::kAllGather, sendcount, dtype, recclSum, -1);
  int n = cs.nranks(), r = cs.rank();
  RECCL_TRY(copyIfNeeded(sendbuff, b(recvbuff, static_cast<size_t>(r) * sendcount, c.esize), sendcount * c.esize));
  if (n == 1) return Status::Ok();
  int nch = channelsFor(cs, sendcount * c.esize * n);
  return cs.runParallel(nch, [=, &cs](int ch) -> Status {
    Range part = partRange(sendcount, nch, ch, 16);
    RECCL_ASSIGN_OR_RETURN(auto ports, ringPorts(cs, ch));
    Prims p(c, ports.send, ports.recv);
    size_t chunk = p.chunkElems();
    size_t rounds = std::max<size_t>(1, (part.len + chunk - 1) / chunk);
    for (size_t round = 0; round < rounds; ++round) {
      size_t s = std::min(part.len, round * chunk);
      size_t len = std::min(chunk, part.len - s);
      auto at = [&](int blk) { return static_cast<size_t>(blk) * sendcount + part.off + s; };
      // The round's last received step (block r + 1) straight to its place in the output.
      p.expectDirect(b(recvbuff, at(mod(r + 1, n)), c.esize), len, static_cast<uint64_t>(n) - 1);
      RECCL_TRY(p.send(cb(recvbuff, at(r), c.esize), len));
      for (int j = 0; j <= n - 3; ++j) RECCL_TRY(p.recvCopySend(b(recvbuff, at(mod(r - 1 - j, n)), c.esize), len));
      RECCL_TRY(p.recv(b(recvbuff, at(mod(r + 1, n)), c.esize), len));
    }
    return p.finishDirect();  // recvCopySend may forward from the output (see prims.h)
  });
}

Status broadcast(channel::ChannelSet& cs, const void* sendbuff, void* recvbuff, size_t count,
                 recclDataType_t dtype, int root) {
  if (count == 0) return Status::Ok();
  StepContext c = makeContext(cs, CollKind::kBroadcast, count, dtype, recclSum, root);
  int n = cs.nranks(), r = cs.rank();
  if (r == root) RECCL_TRY(copyIfNeeded(sendbuff, recvbuff, count * c.esize));
  if (n == 1) return Status::Ok();
  int pos = mod(r - root, n);
  return chainChunks(cs, c, count, [=](Prims& p, size_t off, size_t len) -> Status {
    if (pos == 0) return p.send(cb(recvbuff, off, c.esize), len);
    if (pos == n - 1) return p.recv(b(recvbuff, off, c.esize), len);
    return p.recvCopySend(b(recvbuff, off, c.esize), len);
  });
}

Status reduce(channel::ChannelSet& cs, const void* sendbuff, void* recvbuff, size_t count,
              recclDataType_t dtype, recclRedOp_t op, int root, const std::byte* preMulScalar) {
  if (count == 0) return Status::Ok();
  StepContext c = makeContext(cs, CollKind::kReduce, count, dtype, op, root, preMulScalar);
  int n = cs.nranks(), r = cs.rank();
  if (n == 1) return copyInput(c, sendbuff, recvbuff, count);
  int pos = mod(r - root - 1, n);  // 0 starts the chain, n-1 is the root
  return chainChunks(cs, c, count, [=](Prims& p, size_t off, size_t len) -> Status {
    if (pos == 0) return p.send(cb(sendbuff, off, c.esize), len);
    if (pos == n - 1)
      return p.recvReduceCopy(cb(sendbuff, off, c.esize), b(recvbuff, off, c.esize), len, op == recclAvg);
    return p.recvReduceSend(cb(sendbuff, off, c.esize), len);
  });
}

Status allToAll(channel::ChannelSet& cs, const void* sendbuff, void* recvbuff, size_t count,
                recclDataType_t dtype) {
  if (count == 0) return Status::Ok();
  StepContext c = makeContext(cs, CollKind::kAllToAll, count, dtype, recclSum, -1);
  int n = cs.nranks(), r = cs.rank();
  size_t blk = count;
  if (sendbuff == recvbuff && n > 1)
    return Status(Errc::kInvalidArgument, "recvbuff: in-place all-to-all is not supported");
  RECCL_TRY(copyIfNeeded(cb(sendbuff, r * blk, c.esize), b(recvbuff, r * blk, c.esize), blk * c.esize));
  for (int k = 1; k < n; ++k) {
    int to = mod(r + k, n), from = mod(r - k, n);
    RECCL_ASSIGN_OR_RETURN(auto* sp, cs.sendPort(to, 0));
    RECCL_ASSIGN_OR_RETURN(auto* rp, cs.recvPort(from, 0));
    Prims tx(c, sp, nullptr), rx(c, nullptr, rp);
    size_t chunk = tx.chunkElems(), off = 0;
    do {
      size_t len = std::min(chunk, count - off);
      RECCL_TRY(tx.send(cb(sendbuff, to * blk + off, c.esize), len));
      RECCL_TRY(rx.recv(b(recvbuff, from * blk + off, c.esize), len));
      off += len;
    } while (off < count);
  }
  return Status::Ok();
}

Status barrier(channel::ChannelSet& cs) {
  if (cs.nranks() == 1) return Status::Ok();
  StepContext c = makeContext(cs, CollKind::kBarrier, 1, recclUint8, recclMax, -1);
  uint8_t token = 1;
  return rdAllReduce(cs, c, &token, 1);
}

namespace {

// The group's sends to self and receives from self, paired in call order: (send, receive).
using SelfPair = std::pair<const P2POp*, const P2POp*>;
Result<std::vector<SelfPair>> selfPairs(std::span<const P2POp> ops, int rank) {
  std::vector<const P2POp*> sends, recvs;
  for (const auto& op : ops)
    if (op.peer == rank) (op.isSend ? sends : recvs).push_back(&op);
  if (sends.size() != recvs.size()) {
    const bool moreSends = sends.size() > recvs.size();
    return Status(Errc::kInvalidArgument, std::string("peer: a ") + (moreSends ? "send to" : "receive from") +
                                              " self needs a matching " + (moreSends ? "receive from" : "send to") +
                                              " self in the same group");
  }
  std::vector<SelfPair> pairs;
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i]->count != recvs[i]->count || sends[i]->dtype != recvs[i]->dtype)
      return Status(Errc::kInvalidArgument, "count: send to self and receive from self differ in count or type");
    pairs.emplace_back(sends[i], recvs[i]);
  }
  return pairs;
}

}  // namespace

Status checkSelfPairs(std::span<const P2POp> ops, int rank) { return selfPairs(ops, rank).status(); }

namespace {

// A receive names where its next two steps go in `buf` (direct receive: the transport writes a
// payload there when it learns of it before the payload arrives). The receive is the one running
// on its connection, so the connection's next step is this receive's element `done`. A step is
// named once, and only once the step two before it was taken (RecvPort keeps two targets and
// replaces the older: one whose payload may still be landing must not be replaced). A step here
// already sits in its slot.
void nameDirectTargets(const StepContext& ctx, channel::RecvPort& rp, void* buf, size_t count, size_t done,
                       size_t chunk, uint64_t* targeted) {
  const uint64_t applied = rp.applied();
  for (uint64_t ahead = 1; ahead <= 2; ++ahead) {
    const uint64_t step = applied + ahead;
    const size_t off = done + (ahead - 1) * chunk;
    if (step <= *targeted || off >= count) continue;
    if (step > rp.received())
      Prims(ctx, nullptr, &rp).expectDirect(b(buf, off, ctx.esize), std::min(chunk, count - off), ahead);
    *targeted = step;
  }
}

}  // namespace

Status sendRecv(channel::ChannelSet& cs, std::span<const P2POp> ops) {
  struct State {
    const P2POp* op;
    channel::SendPort* sp = nullptr;
    channel::RecvPort* rp = nullptr;
    StepContext ctx;
    size_t done = 0;
    uint64_t targeted = 0;  // a receive: the last step named as a direct target
    bool started = false;
    bool finished = false;
  };
  int r = cs.rank();
  std::vector<State> st;
  for (const auto& op : ops) {
    if (op.peer == r) continue;  // to and from self: copied below
    State s;
    s.op = &op;
    s.ctx.desc.kind = CollKind::kSendRecv;
    s.ctx.desc.count = op.count;
    s.ctx.desc.dtype = static_cast<uint8_t>(op.dtype);
    s.ctx.dtype = op.dtype;
    s.ctx.esize = reduce::typeSize(op.dtype);
    s.ctx.nranks = cs.nranks();
    s.ctx.cs = &cs;
    s.ctx.directMinBytes = cs.directRecvMinBytes();
    s.ctx.directSendMinBytes = cs.directSendMinBytes();
    st.push_back(s);
  }
  RECCL_ASSIGN_OR_RETURN(auto self, selfPairs(ops, r));
  for (const auto& [send, recv] : self)
    RECCL_TRY(copyIfNeeded(send->buf, recv->buf, send->count * reduce::typeSize(send->dtype)));
  // Connect everything first: each side asks for exactly the directions it uses.
  for (auto& s : st) {
    if (s.op->isSend) {
      RECCL_ASSIGN_OR_RETURN(s.sp, cs.sendPort(s.op->peer, 0));
    } else {
      RECCL_ASSIGN_OR_RETURN(s.rp, cs.recvPort(s.op->peer, 0));
    }
  }
  // Progress all operations without blocking on any single one.
  Deadline idleDeadline = cs.stepDeadline();
  size_t left = st.size();
  int idleSpins = 0;
  while (left > 0) {
    bool progressed = false;
    for (size_t k = 0; k < st.size(); ++k) {
      auto& s = st[k];
      if (s.finished) continue;
      // Operations on the same connection go in call order (as the peer matches them).
      bool earlier = false;
      for (size_t j = 0; j < k && !earlier; ++j)
        earlier = !st[j].finished && st[j].sp == s.sp && st[j].rp == s.rp;
      if (earlier) continue;
      size_t esize = s.ctx.esize;
      size_t chunk = std::max<size_t>(1, (s.sp ? s.sp->chunkBytes() : s.rp->chunkBytes()) / esize);
      if (s.rp) nameDirectTargets(s.ctx, *s.rp, s.op->buf, s.op->count, s.done, chunk, &s.targeted);
      for (;;) {
        bool ready = s.sp ? s.sp->stopped() || s.sp->posted() < s.sp->acked() + s.sp->slots()
                          : s.rp->stopped() || s.rp->received() > s.rp->applied();
        if (!ready) break;
        size_t len = std::min(chunk, s.op->count - s.done);
        Prims p(s.ctx, s.sp, s.rp);
        // A send's step goes from the caller's buffer only where the copy would make the call
        // wait for its ack anyway: to post the step `slots` after it into the slot it holds.
        // The message's last `slots` steps are copied, so the call returns as soon as with
        // copies (finishDirect below waits for acks that came already) and the next call
        // overlaps this one's tail; a root sending to several ranks would otherwise wait for
        // every peer's ack before its next call (docs/results/p2p-direct.md).
        if (s.sp) {
          const std::byte* src = cb(s.op->buf, s.done, esize);
          const bool fromBuffer = s.done + s.sp->slots() * chunk < s.op->count;
          RECCL_TRY(fromBuffer ? p.sendUser(src, len) : p.send(src, len));
        } else {
          RECCL_TRY(p.recv(b(s.op->buf, s.done, esize), len));
        }
        s.done += len;
        progressed = true;
        if (s.done >= s.op->count) {
          s.finished = true;
          --left;
          break;
        }
      }
    }
    if (progressed) {
      idleDeadline = cs.stepDeadline();
      idleSpins = 0;
      continue;
    }
    if (idleDeadline.expired()) return Status(Errc::kTimeout, "send/recv group made no progress before the deadline");
    if (++idleSpins < 64)
      _mm_pause();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(idleSpins < 1024 ? 5 : 200));
  }
  // A send buffer may go once this returns: no resend may read it afterwards.
  for (auto& s : st)
    if (s.sp) RECCL_TRY(Prims(s.ctx, s.sp, nullptr).finishDirect());
  return Status::Ok();
}

}  // namespace reccl::algo
