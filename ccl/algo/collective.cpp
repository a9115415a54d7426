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

// A PreMulSum: this rank's input times its scalar into the communicator's scratch (the caller's
// input stays as it is), then the collective on that buffer with the sum's kernels; the op travels as
// kPreMulSum in the step headers, so a rank that called another op is named as a mismatch.
Status runPreMulSum(channel::ChannelSet& cs, const Collective& c) {
  const size_t elems = c.kind == CollKind::kReduceScatter ? c.count * static_cast<size_t>(cs.nranks()) : c.count;
  const size_t esize = reduce::typeSize(c.dtype);
  std::array<std::byte, 8> scalar{};
  std::memcpy(scalar.data(), c.preMul.at ? c.preMul.at : c.preMul.value.data(), esize);
  std::byte* scaled = nullptr;
  if (elems) {
    scaled = cs.scratch(elems * esize);
    // Every rank fails alike only if every rank lacks the memory; a peer that has it waits for
    // this rank until its deadline, as for any call that fails on one rank.
    if (!scaled)
      return Status(Errc::kSystem, "premulsum: cannot allocate " + std::to_string(elems * esize) +
                                            " bytes for the scaled input");
    reduce::preMultiply(c.send, scaled, elems, c.dtype, scalar.data());
  }
  switch (c.kind) {
    case CollKind::kAllReduce: return allReduce(cs, scaled, c.recv, c.count, c.dtype, c.op);
    case CollKind::kReduce: return reduce(cs, scaled, c.recv, c.count, c.dtype, c.op, c.root);
    case CollKind::kReduceScatter: return reduceScatter(cs, scaled, c.recv, c.count, c.dtype, c.op);
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
