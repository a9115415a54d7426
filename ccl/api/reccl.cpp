// The C API's calls on a communicator: argument checks (each failure names the argument),
// collectives, point-to-point and groups, stats. Nothing throws across this boundary.
#include "reccl/reccl.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "algo/collective.h"
#include "algo/collectives.h"
#include "api/api_result.h"
#include "api/comm_handle.h"
#include "api/group.h"
#include "api/launch.h"
#include "core/comm.h"
#include "reduce/reduce.h"

using namespace reccl::api;

namespace {

using reccl::algo::CollKind;
using reccl::algo::Collective;

// A call runs at once, or joins the calling thread's open group (api/group.h).
recclResult_t submit(recclComm_t comm, const Collective& coll, recclStream_t stream) {
  if (inGroup()) {
    RECCL_CHECK(finish(checkStream(stream)));
    queue(comm, coll, stream);
    return recclSuccess;
  }
  return finish(launch(*comm, coll, stream));
}

// Common checks; `factor` multiplies count (all-gather, reduce-scatter, all-to-all). *out: the
// communicator, usable now. The stream is checked where the call goes (api/launch.h).
recclResult_t checkCommon(recclComm_t comm, size_t count, const recclDataType_t& datatypeArg, size_t factor,
                          reccl::core::Comm** out) {
  int datatype = rawEnum(datatypeArg);
  RECCL_CHECK(usable(comm, out));
  if (!reccl::reduce::validType(datatype))
    return fail(recclInvalidArgument, "datatype: unknown value " + std::to_string(datatype));
  size_t esize = reccl::reduce::typeSize(static_cast<recclDataType_t>(datatype));
  if (factor == SIZE_MAX) factor = static_cast<size_t>((*out)->nranks());
  if (factor == 0 || count > SIZE_MAX / esize / factor || count * esize * factor > static_cast<size_t>(PTRDIFF_MAX))
    return fail(recclInvalidArgument, "count: " + std::to_string(count) + " elements overflow the buffer size");
  return recclSuccess;
}
// checkCommon's factor for "times the number of ranks".
constexpr size_t kPerRank = SIZE_MAX;

// The call's op into `coll`: a built-in one, or one of the communicator's PreMulSum ops (its
// scalar with it); the datatype is checked already.
recclResult_t checkOp(recclComm_t comm, const recclRedOp_t& opArg, Collective* coll) {
  auto op = comm->redOps.resolve(rawEnum(opArg), coll->dtype, &coll->preMul);
  if (!op.ok()) return fail(op.status());
  coll->op = *op;
  return recclSuccess;
}

recclResult_t checkBuf(const void* p, size_t count, const char* name) {
  if (count > 0 && !p) return fail(recclInvalidArgument, std::string(name) + ": null buffer");
  return recclSuccess;
}

// The send and receive buffers are one (in place: the send buffer at `inPlaceSend`, the layout the
// call defines; 0 for none) or apart. Overlapping otherwise, the call would read bytes it wrote.
recclResult_t checkApart(const void* send, size_t sendBytes, const void* recv, size_t recvBytes,
                         uintptr_t inPlaceSend) {
  const auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  if (!send || !recv || sendBytes == 0 || recvBytes == 0 || s == inPlaceSend) return recclSuccess;
  if (s < r + recvBytes && r < s + sendBytes)
    return fail(recclInvalidArgument, "recvbuff: overlaps sendbuff, and not as the call's in-place layout");
  return recclSuccess;
}

recclResult_t checkRoot(const reccl::core::Comm& c, int root) {
  int n = c.nranks();
  if (root < 0 || root >= n)
    return fail(recclInvalidArgument, "root: " + std::to_string(root) + " is not in [0, " + std::to_string(n) + ")");
  return recclSuccess;
}

// Count, rank and stats may be read whenever the core communicator exists (also after finalize
// or a revoke).
recclResult_t inspectable(recclComm_t comm, reccl::core::Comm** out) {
  if (!comm) return fail(recclInvalidArgument, "comm: null communicator");
  int st = settle(comm);
  if (st == recclComm::kReady || st == recclComm::kFinalizing || st == recclComm::kFinalized ||
      st == recclComm::kRevoked) {
    *out = comm->impl.get();
    return recclSuccess;
  }
  return usable(comm, out);  // names why not
}

}  // namespace

extern "C" {

recclResult_t recclGetVersion(int* version) {
  if (!version) return fail(recclInvalidArgument, "version: null pointer");
  *version = RECCL_VERSION_CODE;
  return recclSuccess;
}

const char* recclGetErrorString(recclResult_t result) {
  switch (result) {
    case recclSuccess: return "no error";
    case recclUnhandledCudaError: return "unhandled cuda error";
    case recclSystemError: return "unhandled system error";
    case recclInternalError: return "internal error";
    case recclInvalidArgument: return "invalid argument";
    case recclInvalidUsage: return "invalid usage";
    case recclRemoteError: return "remote process exited or there was a network error";
    case recclInProgress: return "operation in progress";
    case recclTimeout: return "timeout";
    case recclNetworkError: return "network error";
    case recclAborted: return "communicator aborted";
    default: return "unknown result code";
  }
}

const char* recclGetFaultSourceString(recclFaultSource_t source) {
  switch (source) {
    case recclFaultSourceNone: return "none";
    case recclFaultSourceInBand: return "in-band";
    case recclFaultSourceNicPoll: return "nic-poll";
    case recclFaultSourceRtnetlink: return "rtnetlink";
    case recclFaultSourceBpf: return "bpf";
    case recclFaultSourceDaemon: return "daemon";
    default: return "unknown";
  }
}

const char* recclGetLastError(recclComm_t) { return lastError().c_str(); }

recclResult_t recclCommCount(const recclComm_t comm, int* count) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(inspectable(comm, &c));
    if (!count) return fail(recclInvalidArgument, "count: null pointer");
    *count = c->nranks();
    return recclSuccess;
  });
}

recclResult_t recclCommUserRank(const recclComm_t comm, int* rank) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(inspectable(comm, &c));
    if (!rank) return fail(recclInvalidArgument, "rank: null pointer");
    *rank = c->rank();
    return recclSuccess;
  });
}

recclResult_t recclCommPeerLost(const recclComm_t comm, int peer, int* lost) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(inspectable(comm, &c));
    if (!lost) return fail(recclInvalidArgument, "lost: null pointer");
    if (peer < 0 || peer >= c->nranks())
      return fail(recclInvalidArgument, "peer: " + std::to_string(peer) + " is not a rank of this communicator (0.." +
                                            std::to_string(c->nranks() - 1) + ")");
    *lost = c->peerLost(peer) ? 1 : 0;
    return recclSuccess;
  });
}

recclResult_t recclCommGetStats(const recclComm_t comm, recclCommStats_t* stats) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(inspectable(comm, &c));
    if (!stats || stats->size < sizeof(size_t)) return fail(recclInvalidArgument, "stats: null or size not set");
    recclCommStats_t full{};
    full.size = sizeof(full);
    auto s = c->stats();
    full.collectives = s.collectives;
    full.bytesSent = s.bytesSent;
    full.bytesReceived = s.bytesReceived;
    full.duplicateSteps = s.duplicateSteps;
    full.railsTotal = s.railsTotal;
    full.railsUp = s.railsUp;
    full.failovers = s.failovers;
    full.failbacks = s.failbacks;
    full.bytesResent = s.bytesResent;
    full.lastFailoverUs = s.lastFailoverUs;
    full.lastFailoverSignalNs = s.lastFailoverSignalNs;
    full.lastMigrationFirstStepNs = s.lastMigrationFirstStepNs;
    full.relayMigrations = s.relayMigrations;
    full.relayBytesForwarded = s.relayBytesForwarded;
    full.relayPipesServed = s.relayPipesServed;
    full.standbyFailovers = s.standbyFailovers;
    full.faultSource = s.faultSource;
    std::snprintf(full.faultSourceName, sizeof(full.faultSourceName), "%s", s.faultSourceName.c_str());
    full.faultSourceStarting = s.faultSourceStarting ? 1 : 0;
    full.lastMigrationResumeNs = s.lastMigrationResumeNs;
    full.lastFaultMoveFirstStepNs = s.lastFaultMoveFirstStepNs;
    full.lastFaultMoveResumeNs = s.lastFaultMoveResumeNs;
    full.lostConnections = s.lostConnections;
    full.firstLostPeer = s.firstLostPeer;
    // Only what both know is written, and `size` says how much that was: a caller built against a
    // newer header can tell a field this library lacks from one that is 0.
    size_t n = std::min(stats->size, sizeof(full));
    std::memcpy(stats, &full, n);
    stats->size = n;
    return recclSuccess;
  });
}

recclResult_t recclAllReduce(const void* sendbuff, void* recvbuff, size_t count, recclDataType_t datatype,
                             recclRedOp_t op, recclComm_t comm, recclStream_t stream) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(checkCommon(comm, count, datatype, 1, &c));
    Collective coll{CollKind::kAllReduce, sendbuff, recvbuff, count, datatype, recclSum, 0, {}, {}};
    RECCL_CHECK(checkOp(comm, op, &coll));
    RECCL_CHECK(checkBuf(sendbuff, count, "sendbuff"));
    RECCL_CHECK(checkBuf(recvbuff, count, "recvbuff"));
    const size_t bytes = count * reccl::reduce::typeSize(datatype);
    RECCL_CHECK(checkApart(sendbuff, bytes, recvbuff, bytes, reinterpret_cast<uintptr_t>(recvbuff)));
    return submit(comm, coll, stream);
  });
}

recclResult_t recclBroadcast(const void* sendbuff, void* recvbuff, size_t count, recclDataType_t datatype, int root,
                             recclComm_t comm, recclStream_t stream) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(checkCommon(comm, count, datatype, 1, &c));
    RECCL_CHECK(checkRoot(*c, root));
    if (c->rank() == root) RECCL_CHECK(checkBuf(sendbuff, count, "sendbuff"));
    RECCL_CHECK(checkBuf(recvbuff, count, "recvbuff"));
    const size_t bytes = count * reccl::reduce::typeSize(datatype);
    if (c->rank() == root)
      RECCL_CHECK(checkApart(sendbuff, bytes, recvbuff, bytes, reinterpret_cast<uintptr_t>(recvbuff)));
    const Collective coll{CollKind::kBroadcast, sendbuff, recvbuff, count, datatype, recclSum, root, {}, {}};
    return submit(comm, coll, stream);
  });
}

recclResult_t recclBcast(void* buff, size_t count, recclDataType_t datatype, int root, recclComm_t comm,
                         recclStream_t stream) {
  return recclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

recclResult_t recclReduce(const void* sendbuff, void* recvbuff, size_t count, recclDataType_t datatype,
                          recclRedOp_t op, int root, recclComm_t comm, recclStream_t stream) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(checkCommon(comm, count, datatype, 1, &c));
    Collective coll{CollKind::kReduce, sendbuff, recvbuff, count, datatype, recclSum, root, {}, {}};
    RECCL_CHECK(checkOp(comm, op, &coll));
    RECCL_CHECK(checkRoot(*c, root));
    RECCL_CHECK(checkBuf(sendbuff, count, "sendbuff"));
    if (c->rank() == root) RECCL_CHECK(checkBuf(recvbuff, count, "recvbuff"));
    const size_t bytes = count * reccl::reduce::typeSize(datatype);
    if (c->rank() == root)
      RECCL_CHECK(checkApart(sendbuff, bytes, recvbuff, bytes, reinterpret_cast<uintptr_t>(recvbuff)));
    return submit(comm, coll, stream);
  });
}

recclResult_t recclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, recclDataType_t datatype,
                             recclComm_t comm, recclStream_t stream) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(checkCommon(comm, sendcount, datatype, kPerRank, &c));
    RECCL_CHECK(checkBuf(sendbuff, sendcount, "sendbuff"));
    RECCL_CHECK(checkBuf(recvbuff, sendcount, "recvbuff"));
    const size_t bytes = sendcount * reccl::reduce::typeSize(datatype);  // one rank's block
    RECCL_CHECK(checkApart(sendbuff, bytes, recvbuff, bytes * static_cast<size_t>(c->nranks()),
                           reinterpret_cast<uintptr_t>(recvbuff) + bytes * static_cast<size_t>(c->rank())));
    const Collective coll{CollKind::kAllGather, sendbuff, recvbuff, sendcount, datatype, recclSum, 0, {}, {}};
    return submit(comm, coll, stream);
  });
}

recclResult_t recclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, recclDataType_t datatype,
                                 recclRedOp_t op, recclComm_t comm, recclStream_t stream) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(checkCommon(comm, recvcount, datatype, kPerRank, &c));
    Collective coll{CollKind::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, recclSum, 0, {}, {}};
    RECCL_CHECK(checkOp(comm, op, &coll));
    RECCL_CHECK(checkBuf(sendbuff, recvcount, "sendbuff"));
    RECCL_CHECK(checkBuf(recvbuff, recvcount, "recvbuff"));
    const size_t bytes = recvcount * reccl::reduce::typeSize(datatype);  // one rank's block
    RECCL_CHECK(checkApart(sendbuff, bytes * static_cast<size_t>(c->nranks()), recvbuff, bytes,
                           reinterpret_cast<uintptr_t>(recvbuff) - bytes * static_cast<size_t>(c->rank())));
    return submit(comm, coll, stream);
  });
}

recclResult_t recclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, recclDataType_t datatype,
                            recclComm_t comm, recclStream_t stream) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(checkCommon(comm, count, datatype, kPerRank, &c));
    RECCL_CHECK(checkBuf(sendbuff, count, "sendbuff"));
    RECCL_CHECK(checkBuf(recvbuff, count, "recvbuff"));
    if (count > 0 && sendbuff == recvbuff && c->nranks() > 1)
      return fail(recclInvalidArgument, "recvbuff: in-place all-to-all is not supported (recvbuff == sendbuff)");
    const size_t bytes = count * reccl::reduce::typeSize(datatype) * static_cast<size_t>(c->nranks());
    RECCL_CHECK(checkApart(sendbuff, bytes, recvbuff, bytes, reinterpret_cast<uintptr_t>(recvbuff)));
    const Collective coll{CollKind::kAllToAll, sendbuff, recvbuff, count, datatype, recclSum, 0, {}, {}};
    return submit(comm, coll, stream);
  });
}

recclResult_t recclAllToAll(const void* sendbuff, void* recvbuff, size_t count, recclDataType_t datatype,
                            recclComm_t comm, recclStream_t stream) {
  return recclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
}

// Gather (toRoot) and scatter: one group of sends and receives between root and every other rank,
// as NCCL runs them. `mine` is this rank's block (gather's sendbuff, scatter's recvbuff), `blocks`
// root's nranks blocks (gather's recvbuff, scatter's sendbuff), read at root only. Root's own
// block is a send to and receive from itself (a copy), none in place (mine == root's block).
static recclResult_t rootedBlocks(bool toRoot, const void* sendbuff, void* recvbuff, size_t count,
                                  recclDataType_t datatype, int root, recclComm_t comm, recclStream_t stream) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(checkCommon(comm, count, datatype, kPerRank, &c));
    RECCL_CHECK(checkRoot(*c, root));
    void* mine = toRoot ? const_cast<void*>(sendbuff) : recvbuff;
    auto* blocks = static_cast<std::byte*>(toRoot ? recvbuff : const_cast<void*>(sendbuff));
    RECCL_CHECK(checkBuf(mine, count, toRoot ? "sendbuff" : "recvbuff"));
    Collective coll{CollKind::kSendRecv, nullptr, nullptr, 0, recclUint8, recclSum, 0, {}, {}};
    if (c->rank() != root) {
      coll.p2p.push_back({toRoot, root, mine, count, datatype});
      return submit(comm, coll, stream);
    }
    RECCL_CHECK(checkBuf(blocks, count, toRoot ? "recvbuff" : "sendbuff"));
    const int n = c->nranks();
    const size_t bytes = count * reccl::reduce::typeSize(datatype);  // one rank's block
    auto block = [&](int r) { return blocks + bytes * static_cast<size_t>(r); };
    std::byte* own = block(root);
    RECCL_CHECK(toRoot ? checkApart(mine, bytes, blocks, bytes * n, reinterpret_cast<uintptr_t>(own))
                       : checkApart(blocks, bytes * n, mine, bytes,
                                    reinterpret_cast<uintptr_t>(mine) - bytes * static_cast<size_t>(root)));
    for (int r = 0; r < n; ++r)
      if (r != root) coll.p2p.push_back({!toRoot, r, block(r), count, datatype});
    if (count > 0 && mine != own) {
      coll.p2p.push_back({true, root, toRoot ? mine : own, count, datatype});
      coll.p2p.push_back({false, root, toRoot ? own : mine, count, datatype});
    }
    return submit(comm, coll, stream);
  });
}

recclResult_t recclGather(const void* sendbuff, void* recvbuff, size_t count, recclDataType_t datatype, int root,
                          recclComm_t comm, recclStream_t stream) {
  return rootedBlocks(true, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

recclResult_t recclScatter(const void* sendbuff, void* recvbuff, size_t count, recclDataType_t datatype, int root,
                           recclComm_t comm, recclStream_t stream) {
  return rootedBlocks(false, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

recclResult_t recclBarrier(recclComm_t comm, recclStream_t stream) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(checkCommon(comm, 0, recclUint8, 1, &c));
    const Collective coll{CollKind::kBarrier, nullptr, nullptr, 0, recclUint8, recclSum, 0, {}, {}};
    return submit(comm, coll, stream);
  });
}

static recclResult_t p2p(bool isSend, void* buf, size_t count, const recclDataType_t& datatype, int peer,
                         recclComm_t comm, recclStream_t stream) {
  reccl::core::Comm* c = nullptr;
  RECCL_CHECK(checkCommon(comm, count, datatype, 1, &c));
  RECCL_CHECK(checkBuf(buf, count, isSend ? "sendbuff" : "recvbuff"));
  int n = c->nranks();
  if (peer < 0 || peer >= n)
    return fail(recclInvalidArgument, "peer: " + std::to_string(peer) + " is not in [0, " + std::to_string(n) + ")");
  reccl::algo::P2POp op{isSend, peer, buf, count, datatype};
  const Collective coll{CollKind::kSendRecv, nullptr, nullptr, 0, recclUint8, recclSum, 0, {op}, {}};
  // Alone, a send to self has no receive to meet (a group pairs them at recclGroupEnd).
  if (!inGroup()) RECCL_CHECK(finish(reccl::algo::checkSelfPairs(coll.p2p, c->rank())));
  return submit(comm, coll, stream);
}

recclResult_t recclSend(const void* sendbuff, size_t count, recclDataType_t datatype, int peer, recclComm_t comm,
                        recclStream_t stream) {
  return guardedOn(comm, [&] { return p2p(true, const_cast<void*>(sendbuff), count, datatype, peer, comm, stream); });
}

recclResult_t recclRecv(void* recvbuff, size_t count, recclDataType_t datatype, int peer, recclComm_t comm,
                        recclStream_t stream) {
  return guardedOn(comm, [&] { return p2p(false, recvbuff, count, datatype, peer, comm, stream); });
}

recclResult_t recclRedOpCreatePreMulSum(recclRedOp_t* op, void* scalar, recclDataType_t datatype,
                                        recclScalarResidence_t residence, recclComm_t comm) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(checkCommon(comm, 0, datatype, 1, &c));
    if (!op) return fail(recclInvalidArgument, "op: null pointer");
    if (scalar) RECCL_CHECK(finish(reccl::api::checkHostReadable(scalar, "scalar")));
    auto made = comm->redOps.createPreMulSum(scalar, datatype, rawEnum(residence));
    if (!made.ok()) return fail(made.status());
    *op = *made;
    return recclSuccess;
  });
}

recclResult_t recclRedOpDestroy(recclRedOp_t op, recclComm_t comm) {
  return guardedOn(comm, [&]() -> recclResult_t {
    reccl::core::Comm* c = nullptr;
    RECCL_CHECK(inspectable(comm, &c));
    return finish(comm->redOps.destroy(rawEnum(op)));
  });
}

recclResult_t recclGroupStart(void) {
  groupStart();
  return recclSuccess;
}

recclResult_t recclGroupEnd(void) {
  return guarded([] { return groupEnd(); });
}

recclResult_t recclGroupSimulateEnd(recclSimInfo_t* simInfo) {
  return guarded([simInfo] { return groupSimulateEnd(simInfo); });
}

}  // extern "C"

