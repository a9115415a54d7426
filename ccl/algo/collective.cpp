#include "algo/collective.h"

#include <cstring>
#include <string>

#include "reduce/reduce.h"

namespace reccl::algo {

const char* collKindName(CollKind k) noexcept {
  switch (k) {
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

namespace {

// A PreMulSum: the sum's algorithms with this rank's scalar, which each multiplies into the input
// as it reads it (the caller's input stays as it is); the op travels as kPreMulSum in the step
// headers, so a rank that called another op is named as a mismatch.
Status runPreMulSum(channel::ChannelSet& cs, const Collective& c) {
  std::array<std::byte, 8> scalar{};
  std::memcpy(scalar.data(), c.preMul.at ? c.preMul.at : c.preMul.value.data(), reduce::typeSize(c.dtype));
  switch (c.kind) {
    case CollKind::kAllReduce: return allReduce(cs, c.send, c.recv, c.count, c.dtype, c.op, scalar.data());
    case CollKind::kReduce: return reduce(cs, c.send, c.recv, c.count, c.dtype, c.op, c.root, scalar.data());
    case CollKind::kReduceScatter: return reduceScatter(cs, c.send, c.recv, c.count, c.dtype, c.op, scalar.data());
    default: return Status(Errc::kInternal, std::string("premulsum on ") + collKindName(c.kind));
  }
}

}  // namespace

Status run(channel::ChannelSet& cs, const Collective& c) {
  if (c.op == reduce::kPreMulSum) return runPreMulSum(cs, c);
  switch (c.kind) {
    case CollKind::kAllReduce: return allReduce(cs, c.send, c.recv, c.count, c.dtype, c.op);
    case CollKind::kBroadcast: return broadcast(cs, c.send, c.recv, c.count, c.dtype, c.root);
    case CollKind::kReduce: return reduce(cs, c.send, c.recv, c.count, c.dtype, c.op, c.root);
    case CollKind::kAllGather: return allGather(cs, c.send, c.recv, c.count, c.dtype);
    case CollKind::kReduceScatter: return reduceScatter(cs, c.send, c.recv, c.count, c.dtype, c.op);
    case CollKind::kAllToAll: return allToAll(cs, c.send, c.recv, c.count, c.dtype);
    case CollKind::kSendRecv: return sendRecv(cs, c.p2p);
    case CollKind::kBarrier: return barrier(cs);
  }
  return Status(Errc::kInternal, "unknown collective kind");
}

}  // namespace reccl::algo
