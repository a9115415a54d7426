#include "algo/cost.h"

#include <algorithm>

#include "algo/collectives.h"
#include "reduce/reduce.h"

namespace reccl::algo {
namespace {

// Recursive doubling's rounds: log2 of the largest power of two in n, and one more each way for
// the ranks past it (collectives.cpp, rdAllReduce).
double rdRounds(int n) {
  int pow2 = 1, rounds = 0;
  while (pow2 * 2 <= n) {
    pow2 *= 2;
    ++rounds;
  }
  return rounds + (n > pow2 ? 2 : 0);
}

}  // namespace

Cost costOf(const channel::ChannelSet& cs, const Collective& c) {
  const int n = cs.nranks();
  const double ring = n - 1;
  const size_t byteCount = c.count * reduce::typeSize(c.dtype);
  const double bytes = static_cast<double>(byteCount);
  if (c.kind == CollKind::kSendRecv) {
    double sent = 0, received = 0;
    for (const P2POp& op : c.p2p)
      (op.isSend ? sent : received) += static_cast<double>(op.count) * static_cast<double>(reduce::typeSize(op.dtype));
    return c.p2p.empty() ? Cost{} : Cost{1, std::max(sent, received)};
  }
  if (n == 1) return {};
  switch (c.kind) {
    case CollKind::kAllReduce:
      if (allReduceByDoubling(cs, byteCount)) return {rdRounds(n), rdRounds(n) * bytes};
      return {2 * ring, 2 * ring / n * bytes};
    case CollKind::kReduceScatter:  // count: each rank's share
    case CollKind::kAllGather:
    case CollKind::kAllToAll:  // count: to each peer, one peer after another
      return {ring, ring * bytes};
    case CollKind::kBroadcast:  // a chain from the root, pipelined
    case CollKind::kReduce:
      return {ring, bytes};
    case CollKind::kBarrier: return {rdRounds(n), rdRounds(n)};
    case CollKind::kSendRecv: break;
  }
  return {};
}

}  // namespace reccl::algo
