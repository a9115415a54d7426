// The C API: argument checks (each failure names the argument), status mapping, groups.
// Nothing throws across this boundary: every entry point catches what the C++ below might throw.
#include "reccl/reccl.h"

#include <arpa/inet.h>
#include <sys/random.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algo/collectives.h"
#include "api/comm_access.h"
#include "core/bootstrap.h"
#include "core/comm.h"
#include "core/launch_env.h"
#include "core/topology.h"
#include "core/wire.h"
#include "failover/failover.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"
#include "reduce/reduce.h"

struct recclComm {
  std::unique_ptr<reccl::core::Comm> impl;
};

namespace {

using reccl::Errc;
using reccl::Status;

thread_local std::string tlsLastError;
// The root outlives the ranks' own bootstrap deadline a little, so a rank that times out reports
// the timeout rather than the root hanging up on it.
constexpr int64_t kRootGraceMs = 1000;
thread_local int tlsGroupDepth = 0;
thread_local std::vector<std::pair<recclComm_t, reccl::algo::P2POp>> tlsGroupOps;

recclResult_t toResult(const Status& s) {
  switch (s.code()) {
    case Errc::kOk: return recclSuccess;
    case Errc::kInvalidArgument: return recclInvalidArgument;
    case Errc::kInvalidUsage: return recclInvalidUsage;
    case Errc::kSystem: case Errc::kPermission: case Errc::kNotFound: case Errc::kExists: return recclSystemError;
    case Errc::kInternal: return recclInternalError;
    case Errc::kTimeout: return recclTimeout;
    case Errc::kLinkFailure: return recclNetworkError;
    case Errc::kPeerFailure: case Errc::kProtocol: return recclRemoteError;
    case Errc::kUnsupported: return recclInvalidUsage;
    case Errc::kAborted: return recclAborted;
  }
  return recclInternalError;
}

recclResult_t fail(const Status& s) {
  tlsLastError = s.message();
  return toResult(s);
}

recclResult_t fail(recclResult_t r, const std::string& msg) {
  tlsLastError = msg;
  return r;
}

recclResult_t finish(const Status& s) {
  if (s.ok()) return recclSuccess;
  return fail(s);
}

template <typename F>
recclResult_t guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return fail(recclSystemError, "out of memory");
  } catch (const std::exception& e) {
    return fail(recclInternalError, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(recclInternalError, "internal error");
  }
}

// C callers may pass any int in an enum parameter; reading such a value as the enum type is
// undefined in C++, so the raw bits are read before validation.
template <typename E>
int rawEnum(const E& e) {
  int v;
  static_assert(sizeof(E) == sizeof(int));
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

// Common checks; `factor` multiplies count (all-gather, reduce-scatter, all-to-all).
recclResult_t checkCommon(recclComm_t comm, size_t count, const recclDataType_t& datatypeArg, recclStream_t stream,
                          size_t factor) {
  int datatype = rawEnum(datatypeArg);
  if (!comm || !comm->impl) return fail(recclInvalidArgument, "comm: null communicator");
  if (!reccl::reduce::validType(datatype))
    return fail(recclInvalidArgument, "datatype: unknown value " + std::to_string(datatype));
  if (stream != nullptr) return fail(recclInvalidArgument, "stream: must be NULL (host build, no CUDA streams)");
  size_t esize = reccl::reduce::typeSize(static_cast<recclDataType_t>(datatype));
  if (factor == 0 || count > SIZE_MAX / esize / factor || count * esize * factor > static_cast<size_t>(PTRDIFF_MAX))
    return fail(recclInvalidArgument, "count: " + std::to_string(count) + " elements overflow the buffer size");
  return recclSuccess;
}

recclResult_t checkOp(const recclRedOp_t& opArg) {
  int op = rawEnum(opArg);
  if (!reccl::reduce::validOp(op)) return fail(recclInvalidArgument, "op: unknown value " + std::to_string(op));
  return recclSuccess;
}

recclResult_t checkBuf(const void* p, size_t count, const char* name) {
  if (count > 0 && !p) return fail(recclInvalidArgument, std::string(name) + ": null buffer");
  return recclSuccess;
}

recclResult_t checkRoot(recclComm_t comm, int root) {
  int n = comm->impl->nranks();
  if (root < 0 || root >= n)
    return fail(recclInvalidArgument, "root: " + std::to_string(root) + " is not in [0, " + std::to_string(n) + ")");
  return recclSuccess;
}

#define RECCL_CHECK(x)                       \
  do {                                       \
    recclResult_t r_ = (x);                  \
    if (r_ != recclSuccess) return r_;       \
  } while (0)

uint64_t randomU64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = reccl::monotonicNs() ^ (static_cast<uint64_t>(getpid()) << 32);
  return v;
}

recclResult_t initRank(recclComm_t* comm, int nranks, const reccl::core::UniqueIdData& id, int rank,
                       std::shared_ptr<reccl::core::BootstrapRoot> root = nullptr) {
  reccl::core::CommOptions opts;
  Status s = reccl::core::CommOptions::fromEnv(&opts);
  if (!s.ok()) return fail(s);
  opts.makeFailover = reccl::failover::makeFailover;  // the communicator's failover part (ccl/failover)
  auto c = reccl::core::Comm::create(opts, id, nranks, rank, std::move(root));
  if (!c.ok()) return fail(c.status().Wrap("rank " + std::to_string(rank) + " init"));
  *comm = new recclComm{std::move(c).value()};
  return recclSuccess;
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

const char* recclGetLastError(recclComm_t) { return tlsLastError.c_str(); }

recclResult_t recclGetUniqueId(recclUniqueId* uniqueId) {
  return guarded([&]() -> recclResult_t {
    if (!uniqueId) return fail(recclInvalidArgument, "uniqueId: null pointer");
    // The root must be reachable by every rank: RECCL_BOOTSTRAP_IFNAME's address, else the first
    // non-loopback interface, else loopback.
    auto nics = reccl::core::listNics();
    std::string want = reccl::params::BootstrapIfname();
    uint32_t addr = htonl(INADDR_LOOPBACK);
    bool found = false;
    for (const auto& n : reccl::core::selectNics(nics, want.empty() ? "^=lo" : "=" + want, "")) {
      addr = n.addr;
      found = true;
      break;
    }
    if (!want.empty() && !found)
      return fail(recclInvalidArgument, "RECCL_BOOTSTRAP_IFNAME=" + want + " names no interface with an IPv4 address");
    // The unique id carries a random bootstrap key: whoever the application hands it to may join.
    reccl::core::UniqueIdData id;
    id.jobId = randomU64();
    id.bootKey = reccl::core::randomKey();
    reccl::transport::Endpoint bound;
    reccl::core::BootstrapConfig cfg;
    cfg.addr = addr;
    cfg.jobId = id.jobId;
    cfg.bootKey = id.bootKey;
    cfg.deadline = reccl::Deadline::afterMs(reccl::params::BootstrapTimeoutMs() + kRootGraceMs);
    auto root = reccl::core::BootstrapRoot::start(cfg, &bound);
    if (!root.ok()) return fail(root.status().Wrap("bootstrap root"));
    id.addr = bound.addr;
    id.port = bound.port;
    std::memset(uniqueId, 0, sizeof(*uniqueId));
    reccl::core::encodeUniqueId(
        id, std::span<std::byte, reccl::core::kUniqueIdBytes>(reinterpret_cast<std::byte*>(uniqueId->internal),
                                                              reccl::core::kUniqueIdBytes));
    return recclSuccess;
  });
}

recclResult_t recclCommInitRank(recclComm_t* comm, int nranks, recclUniqueId commId, int rank) {
  return guarded([&]() -> recclResult_t {
    if (!comm) return fail(recclInvalidArgument, "comm: null pointer");
    *comm = nullptr;
    if (nranks < 1 || nranks > reccl::core::kMaxRanks)
      return fail(recclInvalidArgument, "nranks: " + std::to_string(nranks) + " is out of range");
    if (rank < 0 || rank >= nranks)
      return fail(recclInvalidArgument, "rank: " + std::to_string(rank) + " is not in [0, " + std::to_string(nranks) + ")");
    auto id = reccl::core::decodeUniqueId(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(commId.internal), sizeof(commId.internal)));
    if (!id.ok()) return fail(id.status());
    return initRank(comm, nranks, *id, rank);
  });
}

recclResult_t recclCommInitFromEnv(recclComm_t* comm) {
  return guarded([&]() -> recclResult_t {
    if (!comm) return fail(recclInvalidArgument, "comm: null pointer");
    *comm = nullptr;
    auto env = reccl::core::parseLaunchEnv([](const char* n) { return getenv(n); });
    if (!env.ok()) return fail(env.status());
    return reccl::api::initFromLaunchEnv(comm, *env);
  });
}

recclResult_t recclCommInitAll(recclComm_t* comms, int ndev, const int* devlist) {
  return guarded([&]() -> recclResult_t {
    if (!comms) return fail(recclInvalidArgument, "comms: null pointer");
    if (ndev < 1 || ndev > 1024) return fail(recclInvalidArgument, "ndev: " + std::to_string(ndev) + " is out of range");
    (void)devlist;  // host build: ranks are threads, there are no devices to pick
    recclUniqueId id;
    RECCL_CHECK(recclGetUniqueId(&id));
    std::vector<recclResult_t> rcs(ndev, recclSuccess);
    std::vector<std::string> errs(ndev);
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i) {
      threads.emplace_back([&, i] {
        rcs[i] = recclCommInitRank(&comms[i], ndev, id, i);
        if (rcs[i] != recclSuccess) errs[i] = tlsLastError;
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) {
      if (rcs[i] != recclSuccess) {
        for (int j = 0; j < ndev; ++j) {
          if (comms[j]) recclCommAbort(comms[j]);
          comms[j] = nullptr;
        }
        return fail(rcs[i], errs[i]);
      }
    }
    return recclSuccess;
  });
}

recclResult_t recclCommDestroy(recclComm_t comm) {
  return guarded([&]() -> recclResult_t {
    if (!comm) return fail(recclInvalidArgument, "comm: null communicator");
    delete comm;
    return recclSuccess;
  });
}

recclResult_t recclCommAbort(recclComm_t comm) {
  return guarded([&]() -> recclResult_t {
    if (!comm) return fail(recclInvalidArgument, "comm: null communicator");
    if (comm->impl) comm->impl->abort();
    delete comm;
    return recclSuccess;
  });
}

recclResult_t recclCommGetAsyncError(recclComm_t comm, recclResult_t* asyncError) {
  if (!comm || !comm->impl) return fail(recclInvalidArgument, "comm: null communicator");
  if (!asyncError) return fail(recclInvalidArgument, "asyncError: null pointer");
  Status s = comm->impl->asyncError();
  *asyncError = toResult(s);
  if (!s.ok()) tlsLastError = s.message();
  return recclSuccess;
}

recclResult_t recclCommCount(const recclComm_t comm, int* count) {
  if (!comm || !comm->impl) return fail(recclInvalidArgument, "comm: null communicator");
  if (!count) return fail(recclInvalidArgument, "count: null pointer");
  *count = comm->impl->nranks();
  return recclSuccess;
}

recclResult_t recclCommUserRank(const recclComm_t comm, int* rank) {
  if (!comm || !comm->impl) return fail(recclInvalidArgument, "comm: null communicator");
  if (!rank) return fail(recclInvalidArgument, "rank: null pointer");
  *rank = comm->impl->rank();
  return recclSuccess;
}

recclResult_t recclCommGetStats(const recclComm_t comm, recclCommStats_t* stats) {
  if (!comm || !comm->impl) return fail(recclInvalidArgument, "comm: null communicator");
  if (!stats || stats->size < sizeof(size_t)) return fail(recclInvalidArgument, "stats: null or size not set");
  recclCommStats_t full{};
  full.size = sizeof(full);
  auto s = comm->impl->stats();
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
  size_t n = std::min(stats->size, sizeof(full));
  size_t callerSize = stats->size;
  std::memcpy(stats, &full, n);
  stats->size = callerSize;
  return recclSuccess;
}

recclResult_t recclAllReduce(const void* sendbuff, void* recvbuff, size_t count, recclDataType_t datatype,
                             recclRedOp_t op, recclComm_t comm, recclStream_t stream) {
  return guarded([&]() -> recclResult_t {
    RECCL_CHECK(checkCommon(comm, count, datatype, stream, 1));
    RECCL_CHECK(checkOp(op));
    RECCL_CHECK(checkBuf(sendbuff, count, "sendbuff"));
    RECCL_CHECK(checkBuf(recvbuff, count, "recvbuff"));
    auto& c = *comm->impl;
    return finish(c.run([&] { return reccl::algo::allReduce(c, sendbuff, recvbuff, count, datatype, op); }));
  });
}

recclResult_t recclBroadcast(const void* sendbuff, void* recvbuff, size_t count, recclDataType_t datatype, int root,
                             recclComm_t comm, recclStream_t stream) {
  return guarded([&]() -> recclResult_t {
    RECCL_CHECK(checkCommon(comm, count, datatype, stream, 1));
    RECCL_CHECK(checkRoot(comm, root));
    if (comm->impl->rank() == root) RECCL_CHECK(checkBuf(sendbuff, count, "sendbuff"));
    RECCL_CHECK(checkBuf(recvbuff, count, "recvbuff"));
    auto& c = *comm->impl;
    return finish(c.run([&] { return reccl::algo::broadcast(c, sendbuff, recvbuff, count, datatype, root); }));
  });
}

recclResult_t recclReduce(const void* sendbuff, void* recvbuff, size_t count, recclDataType_t datatype,
                          recclRedOp_t op, int root, recclComm_t comm, recclStream_t stream) {
  return guarded([&]() -> recclResult_t {
    RECCL_CHECK(checkCommon(comm, count, datatype, stream, 1));
    RECCL_CHECK(checkOp(op));
    RECCL_CHECK(checkRoot(comm, root));
    RECCL_CHECK(checkBuf(sendbuff, count, "sendbuff"));
    if (comm->impl->rank() == root) RECCL_CHECK(checkBuf(recvbuff, count, "recvbuff"));
    auto& c = *comm->impl;
    return finish(c.run([&] { return reccl::algo::reduce(c, sendbuff, recvbuff, count, datatype, op, root); }));
  });
}

recclResult_t recclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, recclDataType_t datatype,
                             recclComm_t comm, recclStream_t stream) {
  return guarded([&]() -> recclResult_t {
    RECCL_CHECK(checkCommon(comm, sendcount, datatype, stream, comm ? comm->impl->nranks() : 1));
    RECCL_CHECK(checkBuf(sendbuff, sendcount, "sendbuff"));
    RECCL_CHECK(checkBuf(recvbuff, sendcount, "recvbuff"));
    auto& c = *comm->impl;
    return finish(c.run([&] { return reccl::algo::allGather(c, sendbuff, recvbuff, sendcount, datatype); }));
  });
}

recclResult_t recclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, recclDataType_t datatype,
                                 recclRedOp_t op, recclComm_t comm, recclStream_t stream) {
  return guarded([&]() -> recclResult_t {
    RECCL_CHECK(checkCommon(comm, recvcount, datatype, stream, comm ? comm->impl->nranks() : 1));
    RECCL_CHECK(checkOp(op));
    RECCL_CHECK(checkBuf(sendbuff, recvcount, "sendbuff"));
    RECCL_CHECK(checkBuf(recvbuff, recvcount, "recvbuff"));
    auto& c = *comm->impl;
    return finish(c.run([&] { return reccl::algo::reduceScatter(c, sendbuff, recvbuff, recvcount, datatype, op); }));
  });
}

recclResult_t recclAllToAll(const void* sendbuff, void* recvbuff, size_t count, recclDataType_t datatype,
                            recclComm_t comm, recclStream_t stream) {
  return guarded([&]() -> recclResult_t {
    RECCL_CHECK(checkCommon(comm, count, datatype, stream, comm ? comm->impl->nranks() : 1));
    RECCL_CHECK(checkBuf(sendbuff, count, "sendbuff"));
    RECCL_CHECK(checkBuf(recvbuff, count, "recvbuff"));
    if (count > 0 && sendbuff == recvbuff && comm->impl->nranks() > 1)
      return fail(recclInvalidArgument, "recvbuff: in-place all-to-all is not supported (recvbuff == sendbuff)");
    auto& c = *comm->impl;
    return finish(c.run([&] { return reccl::algo::allToAll(c, sendbuff, recvbuff, count, datatype); }));
  });
}

recclResult_t recclBarrier(recclComm_t comm, recclStream_t stream) {
  return guarded([&]() -> recclResult_t {
    RECCL_CHECK(checkCommon(comm, 0, recclUint8, stream, 1));
    auto& c = *comm->impl;
    return finish(c.run([&] { return reccl::algo::barrier(c); }));
  });
}

static recclResult_t p2p(bool isSend, void* buf, size_t count, const recclDataType_t& datatype, int peer,
                         recclComm_t comm, recclStream_t stream) {
  RECCL_CHECK(checkCommon(comm, count, datatype, stream, 1));
  RECCL_CHECK(checkBuf(buf, count, isSend ? "sendbuff" : "recvbuff"));
  int n = comm->impl->nranks();
  if (peer < 0 || peer >= n)
    return fail(recclInvalidArgument, "peer: " + std::to_string(peer) + " is not in [0, " + std::to_string(n) + ")");
  reccl::algo::P2POp op{isSend, peer, buf, count, datatype};
  if (tlsGroupDepth > 0) {
    tlsGroupOps.emplace_back(comm, op);
    return recclSuccess;
  }
  auto& c = *comm->impl;
  return finish(c.run([&] { return reccl::algo::sendRecv(c, std::span(&op, 1)); }));
}

recclResult_t recclSend(const void* sendbuff, size_t count, recclDataType_t datatype, int peer, recclComm_t comm,
                        recclStream_t stream) {
  return guarded([&] { return p2p(true, const_cast<void*>(sendbuff), count, datatype, peer, comm, stream); });
}

recclResult_t recclRecv(void* recvbuff, size_t count, recclDataType_t datatype, int peer, recclComm_t comm,
                        recclStream_t stream) {
  return guarded([&] { return p2p(false, recvbuff, count, datatype, peer, comm, stream); });
}

recclResult_t recclGroupStart(void) {
  ++tlsGroupDepth;
  return recclSuccess;
}

recclResult_t recclGroupEnd(void) {
  return guarded([&]() -> recclResult_t {
    if (tlsGroupDepth == 0) return fail(recclInvalidUsage, "recclGroupEnd without recclGroupStart");
    if (--tlsGroupDepth > 0) return recclSuccess;
    auto ops = std::move(tlsGroupOps);
    tlsGroupOps.clear();
    // One group per communicator, in order of first appearance.
    std::vector<recclComm_t> comms;
    for (auto& [c, op] : ops)
      if (std::find(comms.begin(), comms.end(), c) == comms.end()) comms.push_back(c);
    for (recclComm_t c : comms) {
      std::vector<reccl::algo::P2POp> mine;
      for (auto& [cc, op] : ops)
        if (cc == c) mine.push_back(op);
      auto& impl = *c->impl;
      recclResult_t r = finish(impl.run([&] { return reccl::algo::sendRecv(impl, mine); }));
      if (r != recclSuccess) return r;
    }
    return recclSuccess;
  });
}

}  // extern "C"

namespace reccl::api {
core::Comm* commImpl(recclComm_t comm) noexcept { return comm ? comm->impl.get() : nullptr; }

recclResult_t initFromLaunchEnv(recclComm_t* comm, core::LaunchEnv env) {
  return guarded([&]() -> recclResult_t {
    *comm = nullptr;
    auto addr = transport::resolveIpv4(env.rootHost);
    if (!addr.ok()) return fail(addr.status());
    core::UniqueIdData id{*addr, env.rootPort, env.jobId, env.bootKey};
    std::shared_ptr<core::BootstrapRoot> root;
    if (env.rank == 0) {
      // Rank 0 holds the launcher's address for its communicator's lifetime, so a second job on
      // it fails at once and a rank of one that reaches this root fails both.
      core::BootstrapConfig cfg;
      cfg.addr = htonl(INADDR_ANY);
      cfg.port = env.rootPort;
      cfg.jobId = env.jobId;
      cfg.bootKey = env.bootKey;
      cfg.deadline = Deadline::afterMs(params::BootstrapTimeoutMs() + kRootGraceMs);
      cfg.lingerUntilStopped = true;
      auto r = core::BootstrapRoot::start(cfg, nullptr);
      if (!r.ok()) return fail(r.status().Wrap("rank 0: bootstrap root on port " + std::to_string(env.rootPort)));
      root = std::move(r).value();
    }
    RECCL_INFO(kLogInit, "init from %s environment: rank %d of %d, root %s:%u, job secret %s", env.source.c_str(),
               env.rank, env.nranks, env.rootHost.c_str(), env.rootPort,
               env.secretFrom.empty() ? "none (open bootstrap)" : env.secretFrom.c_str());
    core::wipeKey(env.bootKey);
    recclResult_t rc = initRank(comm, env.nranks, id, env.rank, std::move(root));
    core::wipeKey(id.bootKey);
    return rc;
  });
}

}  // namespace reccl::api
