// The C API's communicator life cycle: unique ids, init (blocking or not, from a launcher's
// environment, all ranks as threads), finalize, destroy, abort and the async error.
#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "algo/collective.h"
#include "api/api_result.h"
#include "api/comm_access.h"
#include "api/comm_handle.h"
#include "api/group.h"
#include "api/launch.h"
#include "api/pmix_rendezvous.h"
#include "core/bootstrap.h"
#include "core/launch_env.h"
#include "core/wire.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"
#include "reccl/reccl.h"

using namespace reccl;
using namespace reccl::api;

namespace {

// How long recclCommAbort waits for a finalize it interrupted (its barrier returns at once on an
// aborted communicator), and how much longer than its own deadlines recclCommDestroy waits for
// pending work before it gives up on it.
constexpr auto kAbortWait = std::chrono::seconds(10);
constexpr int64_t kDestroyGraceMs = 10000;

// A close whose communicator still has calls inside after an abort and its wait: the handle stays
// closed and nothing is freed under those calls (the memory is theirs, leaked).
recclResult_t leftToCalls(recclComm_t, int left, const char* who) {
  return fail(recclTimeout, std::string(who) + ": " + std::to_string(left) +
                                " call(s) on other threads had not returned " + std::to_string(kAbortWait.count()) +
                                " s after the communicator was aborted; the handle is closed and its memory left to them");
}

// `commIds`: one per bootstrap root (recclCommInitRankScalable), or one.
recclResult_t initRankChecked(recclComm_t* comm, int nranks, const recclUniqueId* commIds, int nIds, int rank,
                              const recclConfig_t* config, const std::string& homeNic = "") {
  if (!comm) return fail(recclInvalidArgument, "comm: null pointer");
  *comm = nullptr;
  if (nranks < 1 || nranks > core::kMaxRanks)
    return fail(recclInvalidArgument, "nranks: " + std::to_string(nranks) + " is out of range");
  if (rank < 0 || rank >= nranks)
    return fail(recclInvalidArgument, "rank: " + std::to_string(rank) + " is not in [0, " + std::to_string(nranks) + ")");
  CommConfig cfg;
  if (Status s = readConfig(config, CommConfig{}, &cfg); !s.ok()) return fail(s);
  cfg.homeNic = homeNic;
  core::RendezvousIds rendezvous;
  auto& ids = rendezvous.ids;
  ids.reserve(static_cast<size_t>(nIds));
  for (int i = 0; i < nIds; ++i) {
    auto id = core::decodeUniqueId(std::span<const std::byte>(reinterpret_cast<const std::byte*>(commIds[i].internal),
                                                              sizeof(commIds[i].internal)));
    if (!id.ok()) return fail(nIds == 1 ? id.status() : id.status().Wrap("commIds[" + std::to_string(i) + "]"));
    ids.push_back(*id);
    core::wipeKey(id->bootKey);
    for (int j = 0; j < i; ++j)
      if (ids[j].addr == ids[i].addr && ids[j].port == ids[i].port)
        return fail(recclInvalidArgument, "commIds[" + std::to_string(j) + "] and commIds[" + std::to_string(i) +
                                              "] name one root (" + transport::Endpoint{ids[i].addr, ids[i].port}.str() +
                                              "): each needs its own recclGetUniqueId");
  }
  return startInit(comm, cfg, nranks, ids, rank);
}

// Waits (bounded) for a pending operation; true when it finished.
// Whether `op` ended within `limit`; `stop`, when given, ends the wait early (false then too).
bool waitPending(const std::shared_ptr<PendingOp>& op, std::chrono::milliseconds limit,
                 const std::atomic<bool>* stop = nullptr) {
  std::unique_lock lk(op->mu);
  op->cv.wait_for(lk, limit, [&] { return op->done || (stop && stop->load()); });
  return op->done;
}

// "a.b.c.d:port" as rank 0 shared it.
Result<transport::Endpoint> parseShared(const std::string& text, int fromRank) {
  auto colon = text.rfind(':');
  uint32_t addr = 0;
  char* end = nullptr;
  long port = colon == std::string::npos ? 0 : std::strtol(text.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || *end != '\0' || port < 1 || port > 65535 ||
      inet_pton(AF_INET, text.substr(0, colon).c_str(), &addr) != 1)
    return Status(Errc::kProtocol, "rank " + std::to_string(fromRank) + " shared '" + text +
                                       "' as its bootstrap root's address, not a.b.c.d:port");
  return transport::Endpoint{addr, static_cast<uint16_t>(port)};
}

}  // namespace

extern "C" {

recclResult_t recclGetUniqueId(recclUniqueId* uniqueId) {
  return guarded([&]() -> recclResult_t {
    if (!uniqueId) return fail(recclInvalidArgument, "uniqueId: null pointer");
    auto id = startDetachedRoot();
    if (!id.ok()) return fail(id.status());
    std::memset(uniqueId, 0, sizeof(*uniqueId));
    core::encodeUniqueId(*id, std::span<std::byte, core::kUniqueIdBytes>(reinterpret_cast<std::byte*>(uniqueId->internal),
                                                                         core::kUniqueIdBytes));
    core::wipeKey(id->bootKey);
    return recclSuccess;
  });
}

recclResult_t recclCommInitRank(recclComm_t* comm, int nranks, recclUniqueId commId, int rank) {
  return guarded([&] { return initRankChecked(comm, nranks, &commId, 1, rank, nullptr); });
}

recclResult_t recclCommInitRankConfig(recclComm_t* comm, int nranks, recclUniqueId commId, int rank,
                                      recclConfig_t* config) {
  return guarded([&] { return initRankChecked(comm, nranks, &commId, 1, rank, config); });
}

recclResult_t recclCommInitRankScalable(recclComm_t* comm, int nranks, int rank, int nId, recclUniqueId* commIds,
                                        recclConfig_t* config) {
  return guarded([&]() -> recclResult_t {
    if (comm) *comm = nullptr;
    if (nId < 1 || nId > std::min(nranks, core::kMaxRoots))
      return fail(recclInvalidArgument, "nId: " + std::to_string(nId) + " is not in [1, min(nranks " +
                                            std::to_string(nranks) + ", " + std::to_string(core::kMaxRoots) + ")]");
    if (!commIds) return fail(recclInvalidArgument, "commIds: null pointer");
    return initRankChecked(comm, nranks, commIds, nId, rank, config);
  });
}

recclResult_t recclCommInitFromEnv(recclComm_t* comm) {
  return guarded([&]() -> recclResult_t {
    if (!comm) return fail(recclInvalidArgument, "comm: null pointer");
    *comm = nullptr;
    auto env = core::parseLaunchEnv([](const char* n) { return getenv(n); });
    if (!env.ok()) return fail(env.status());
    return initFromLaunchEnv(comm, *env);
  });
}

recclResult_t recclCommInitAll(recclComm_t* comms, int ndev, const int* devlist) {
  return guarded([&]() -> recclResult_t {
    if (!comms) return fail(recclInvalidArgument, "comms: null pointer");
    if (ndev < 1 || ndev > 1024) return fail(recclInvalidArgument, "ndev: " + std::to_string(ndev) + " is out of range");
    if (devlist) RECCL_CHECK(finish(checkDeviceList(devlist, ndev)));
    recclUniqueId id;
    RECCL_CHECK(recclGetUniqueId(&id));
    std::vector<recclResult_t> rcs(ndev, recclSuccess);
    std::vector<std::string> errs(ndev);
    std::vector<std::thread> threads;
    std::string startErr;
    threads.reserve(static_cast<size_t>(ndev));
    for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
    for (int i = 0; i < ndev; ++i) {
      try {
        threads.emplace_back([&, i] {
          // The rank's device is the one current at its init. A rank that cannot take its
          // device still joins the rendezvous as a host rank, so the others do not wait for
          // it until the deadline; it fails, and all are aborted below.
          Status dev = devlist ? setDevice(devlist[i]) : Status::Ok();
          rcs[i] = recclCommInitRank(&comms[i], ndev, id, i);
          if (!dev.ok()) rcs[i] = fail(dev);
          if (rcs[i] != recclSuccess) errs[i] = lastError();
        });
      } catch (const std::system_error& e) {
        // The ranks started wait for this one at the rendezvous until its deadline: they fail
        // there, and are joined and aborted below with the others.
        startErr = "cannot start the thread of rank " + std::to_string(i) + ": " + e.what();
        break;
      }
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) {
      if (rcs[i] != recclSuccess || !startErr.empty()) {
        for (int j = 0; j < ndev; ++j) {
          if (comms[j]) recclCommAbort(comms[j]);
          comms[j] = nullptr;
        }
        return startErr.empty() ? fail(rcs[i], errs[i]) : fail(recclSystemError, startErr);
      }
    }
    return recclSuccess;
  });
}

recclResult_t recclCommFinalize(recclComm_t comm) {
  return guardedOn(comm, [&](CallTicket& held) -> recclResult_t {
    core::Comm* c = nullptr;
    RECCL_CHECK(usable(comm, &c));
    // A barrier: once it returns on any rank, every rank's earlier work is done. It goes where a
    // host call goes (api/launch.h), so it runs after work still queued on streams.
    const algo::Collective barrier{algo::CollKind::kBarrier, nullptr, nullptr, 0, recclUint8, recclSum, 0, {}, {}};
    if (comm->config.blocking) {
      Status s = launch(*comm, barrier, nullptr);
      // A revoke on another thread meanwhile (which failed the barrier) keeps the handle revoked.
      {
        std::lock_guard lk(comm->settleMu);
        int ready = recclComm::kReady;
        if (comm->state.compare_exchange_strong(ready, recclComm::kFinalized, std::memory_order_acq_rel) && !s.ok())
          comm->failure = s;
      }
      return finish(s);
    }
    auto op = std::make_shared<PendingOp>();
    {
      // One step with the state: a revoke on another thread meanwhile leaves no pending finalize.
      std::lock_guard lk(comm->settleMu);
      int ready = recclComm::kReady;
      if (comm->state.compare_exchange_strong(ready, recclComm::kFinalizing, std::memory_order_acq_rel))
        comm->pending = op;
      else
        op.reset();
    }
    if (!op) return usable(comm, &c);  // revoked meanwhile: names it
    // Touches the communicator only inside the barrier (run() and the stream layer's queue, which
    // recclCommAbort fails and waits out); recclCommDestroy waits for the whole operation.
    // The call's ticket goes with the thread: a close waits for the thread as for any call.
    std::thread([op, comm, barrier, held = std::move(held)] {
      Status s = launch(*comm, barrier, nullptr);
      {
        std::lock_guard lk(op->mu);
        op->status = s;
        op->done = true;
      }
      op->cv.notify_all();
    }).detach();
    return recclInProgress;
  });
}

recclResult_t recclCommDestroy(recclComm_t comm) {
  return guarded([&]() -> recclResult_t {
    if (!comm) return fail(recclInvalidArgument, "comm: null communicator");
    if (beginClose(comm, kDestroying) != kNoClose) return refusedClosed();  // later calls are refused
    forgetQueued(comm);  // the handle goes: no thread's open group may run on it
    settle(comm);
    std::shared_ptr<PendingOp> op;
    {
      std::lock_guard lk(comm->settleMu);
      op = comm->pending;
    }
    std::string gaveUp;
    // Init is bounded by its bootstrap deadline, finalize and any call by its collective
    // deadline: the communicator's config where it sets them, else the environment's.
    const CommConfig& c = comm->config;
    int64_t boot = c.bootstrapTimeoutMs != CommConfig::kUnset ? c.bootstrapTimeoutMs : params::BootstrapTimeoutMs();
    int64_t coll = c.timeoutMs != CommConfig::kUnset ? c.timeoutMs : params::TimeoutMs();
    int64_t limit = std::max(boot, coll) + kDestroyGraceMs;
    if (op) {
      bool abandoned = false;
      if (!waitPending(op, std::chrono::milliseconds(limit), &comm->abortRequested)) {
        std::lock_guard lk(op->mu);
        if (!op->done) op->abandon();
        abandoned = op->abandoned;
      }
      if (abandoned && !comm->abortRequested.load()) {
        gaveUp = "comm: destroyed, but its pending " +
                 std::string(comm->state.load() == recclComm::kFinalizing ? "finalize" : "init") +
                 " had not ended after " + std::to_string(limit) + " ms and was aborted";
      }
      settle(comm);
    }
    int st = comm->state.load(std::memory_order_acquire);
    if (st == recclComm::kFinalizing && comm->impl) {  // gave up waiting on it
      abortDevice(*comm);
      comm->impl->abort();
    }
    // Calls other threads still have inside (a destroy beside them is the caller's mistake, but
    // never a crash): each ends by its own deadline, and an abort ends those that do not.
    if (waitCallsOut(comm, std::chrono::milliseconds(limit), true) > 0 || comm->abortRequested.load()) {
      comm->aborting.store(true, std::memory_order_release);
      abortDevice(*comm);
      if (comm->impl) comm->impl->abort();
      if (int left = waitCallsOut(comm, kAbortWait); left > 0)
        return leftToCalls(comm, left, "recclCommDestroy");
      if (!comm->abortRequested.load())
        gaveUp = "comm: destroyed while a call on another thread was still running after " + std::to_string(limit) +
                 " ms; the communicator was aborted";
    }
    bury(comm);  // the stream layer (if any) goes before the core communicator it runs on
    // The handle is gone either way; the caller learns that the work it waited for did not end.
    return gaveUp.empty() ? recclSuccess : fail(recclTimeout, gaveUp);
  });
}

recclResult_t recclCommAbort(recclComm_t comm) {
  return guarded([&]() -> recclResult_t {
    if (!comm) return fail(recclInvalidArgument, "comm: null communicator");
    if (Closer before = beginClose(comm, kAborting); before != kNoClose) {  // later calls are refused
      if (before != kDestroying || comm->buried.load()) return refusedClosed();
      requestAbort(comm);  // the destroy in progress on another thread aborts what it waits for
      return recclSuccess;
    }
    forgetQueued(comm);  // the handle goes: no thread's open group may run on it
    int st = settle(comm);
    std::shared_ptr<PendingOp> op;
    {
      std::lock_guard lk(comm->settleMu);
      op = comm->pending;
    }
    if (op && st == recclComm::kInitializing) {
      std::lock_guard lk(op->mu);
      op->abandon();
    }
    abortDevice(*comm);  // stops waiting for streams first: its worker may be inside impl
    if (comm->impl) comm->impl->abort();
    // A finalize in flight returns at once from an aborted communicator's barrier, and so does
    // any call another thread has inside (a watchdog's abort): freed once they have left.
    if (op && st == recclComm::kFinalizing) waitPending(op, kAbortWait);
    if (int left = waitCallsOut(comm, kAbortWait); left > 0) return leftToCalls(comm, left, "recclCommAbort");
    bury(comm);
    return recclSuccess;
  });
}

recclResult_t recclCommGetAsyncError(recclComm_t comm, recclResult_t* asyncError) {
  return guardedOn(comm, [&]() -> recclResult_t {
    if (!asyncError) return fail(recclInvalidArgument, "asyncError: null pointer");
    Status s;
    switch (settle(comm)) {
      case recclComm::kInitializing:
      case recclComm::kFinalizing:
        *asyncError = recclInProgress;
        return recclSuccess;
      case recclComm::kFailed: {
        std::lock_guard lk(comm->settleMu);
        s = comm->failure;
        break;
      }
      case recclComm::kFinalized: {
        std::lock_guard lk(comm->settleMu);
        s = comm->failure.ok() ? comm->impl->asyncError() : comm->failure;
        break;
      }
      case recclComm::kRevoked:
        // NCCL's ncclCommRevoke: in progress until the communicator is quiet, then success. Quiet:
        // no call inside the handle but this one (a call on its way in, a group between two
        // launches, a device call waiting for its event), none inside the core communicator (a
        // channel worker that outlived its call counts there), no stream work queued.
        *asyncError = comm->calls.load() <= 1 && comm->impl->quiet() && deviceIdle(*comm) ? recclSuccess
                                                                                          : recclInProgress;
        return recclSuccess;
      default:
        s = comm->impl->asyncError();
    }
    if (s.ok()) s = deviceAsyncError(*comm);
    *asyncError = toResult(s);
    if (!s.ok()) lastError() = s.message();
    return recclSuccess;
  });
}

}  // extern "C"

namespace reccl::api {

core::Comm* commImpl(recclComm_t comm) noexcept {
  if (!comm) return nullptr;
  int st = settle(comm);
  return st == recclComm::kInitializing || st == recclComm::kFailed ? nullptr : comm->impl.get();
}

recclResult_t initRankOnNic(recclComm_t* comm, int nranks, const recclUniqueId& id, int rank,
                            const recclConfig_t* config, const std::string& homeNic) {
  return guarded([&] { return initRankChecked(comm, nranks, &id, 1, rank, config, homeNic); });
}

recclResult_t initFromLaunchEnv(recclComm_t* comm, core::LaunchEnv env) {
  return guarded([&]() -> recclResult_t {
    *comm = nullptr;
    struct Wipe {
      core::Key& k;
      ~Wipe() { core::wipeKey(k); }
    } wipe{env.bootKey};
    const int64_t bootMs = params::BootstrapTimeoutMs();
    // Under PMIx the launcher shares every root's address, so a large job bootstraps over
    // ceil(nranks / RECCL_RANKS_PER_ROOT) roots (recclCommInitRankScalable's blocks), each
    // started by the first rank of its block; at a fixed address (MASTER_ADDR, srun's derived
    // port) there is one root, rank 0's.
    const bool pmix = env.rendezvous == core::Rendezvous::kPmix;
    const int nroots = pmix ? params::bootstrapRootsFor(env.nranks, core::kMaxRoots) : 1;
    std::vector<int> rootRanks;
    for (int k = 0; k < nroots; ++k) rootRanks.push_back(core::rankBlock(env.nranks, nroots, k).first);
    const bool startsRoot = std::find(rootRanks.begin(), rootRanks.end(), env.rank) != rootRanks.end();
    std::shared_ptr<core::BootstrapRoot> root;
    transport::Endpoint rootEp;
    if (startsRoot) {
      // A root's rank holds it for its communicator's lifetime: at a launcher's fixed address the
      // address stays taken, so a second job on it fails at once and a rank of one that reaches
      // this root fails both.
      core::BootstrapConfig cfg;
      cfg.addr = htonl(INADDR_ANY);
      cfg.port = pmix ? 0 : env.rootPort;
      cfg.jobId = env.jobId;
      cfg.bootKey = env.bootKey;
      cfg.deadline = Deadline::afterMs(bootMs + core::kRootGraceMs);
      cfg.lingerUntilStopped = true;
      auto r = core::BootstrapRoot::start(cfg, &rootEp);
      if (!r.ok())
        return fail(r.status().Wrap("rank " + std::to_string(env.rank) + ": bootstrap root on port " +
                                    std::to_string(cfg.port)));
      root = std::move(r).value();
    }
    core::RendezvousIds rendezvous;
    auto& ids = rendezvous.ids;
    ids.reserve(static_cast<size_t>(nroots));
    if (pmix) {
      // A root listens on every address; the others are told the one ranks reach.
      std::string mine;
      if (startsRoot) {
        auto a = bootstrapAddress();
        if (!a.ok()) return fail(a.status());
        mine = transport::Endpoint{*a, rootEp.port}.str();
      }
      auto shared = pmixShareRootAddresses(env.rank, rootRanks, mine, bootMs);
      if (!shared.ok()) return fail(shared.status());
      for (size_t k = 0; k < shared->size(); ++k) {
        auto ep = parseShared((*shared)[k], rootRanks[k]);
        if (!ep.ok()) return fail(ep.status());
        ids.push_back({ep->addr, ep->port, env.jobId, env.bootKey});
      }
      env.rootHost = (*shared)[0].substr(0, (*shared)[0].rfind(':'));
      env.rootPort = ids[0].port;
    } else {
      auto addr = transport::resolveIpv4(env.rootHost);
      if (!addr.ok()) return fail(addr.status().Wrap("rendezvous host from " + env.addressFrom));
      ids.push_back({*addr, env.rootPort, env.jobId, env.bootKey});
    }
    RECCL_INFO(kLogInit, "init from %s environment: rank %d of %d, root %s:%u (from %s)%s, job secret %s",
               env.source.c_str(), env.rank, env.nranks, env.rootHost.c_str(), env.rootPort, env.addressFrom.c_str(),
               nroots > 1 ? (" and " + std::to_string(nroots - 1) + " more").c_str() : "",
               env.secretFrom.empty() ? "none (open bootstrap)" : env.secretFrom.c_str());
    return startInit(comm, CommConfig{}, env.nranks, ids, env.rank, std::move(root));
  });
}

}  // namespace reccl::api
