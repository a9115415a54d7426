#include "algo/collective.h"

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

Status run(channel::ChannelSet& cs, const Collective& c) {
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
