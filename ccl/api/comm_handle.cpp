#include "api/comm_handle.h"

#include <arpa/inet.h>
#include <sys/random.h>
#include <unistd.h>

#include <cinttypes>
#include <cstddef>
#include <deque>
#include <thread>

#include "api/api_result.h"
#include "api/launch.h"
#include "core/auth.h"
#include "core/bootstrap.h"
#include "core/topology.h"
#include "failover/failover.h"
#include "reccl/common/deadline.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"

namespace reccl::api {
namespace {

// The end of recclConfig_t's first version: a caller's struct must hold at least this much.
constexpr size_t kConfigV1Bytes = offsetof(recclConfig_t, commName) + sizeof(const char*);

uint64_t randomU64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = monotonicNs() ^ (static_cast<uint64_t>(getpid()) << 32);
  return v;
}

Status checkInt(const char* field, int v, int lo, int hi) {
  if (v == CommConfig::kUnset || (v >= lo && v <= hi)) return Status::Ok();
  return Status(Errc::kInvalidArgument, std::string("config.") + field + ": " + std::to_string(v) + " is not in [" +
                                            std::to_string(lo) + ", " + std::to_string(hi) +
                                            "] (RECCL_CONFIG_UNDEF_INT: from the environment)");
}

}  // namespace

Status readConfig(const recclConfig_t* config, const CommConfig& inherit, CommConfig* out) {
  if (!config) {
    *out = inherit;
    return Status::Ok();
  }
  if (config->magic != RECCL_CONFIG_MAGIC) {
    char m[16];
    std::snprintf(m, sizeof m, "0x%08x", config->magic);
    return Status(Errc::kInvalidArgument,
                  std::string("config: magic ") + m + " is not RECCL_CONFIG_MAGIC: initialize it with RECCL_CONFIG_INITIALIZER");
  }
  if (config->size < kConfigV1Bytes)
    return Status(Errc::kInvalidArgument, "config.size: " + std::to_string(config->size) +
                                              " bytes is smaller than the first recclConfig_t (" +
                                              std::to_string(kConfigV1Bytes) + "): initialize it with RECCL_CONFIG_INITIALIZER");
  CommConfig c;
  if (config->blocking != CommConfig::kUnset && config->blocking != 0 && config->blocking != 1)
    return Status(Errc::kInvalidArgument, "config.blocking: " + std::to_string(config->blocking) + " is not 0 or 1");
  c.blocking = config->blocking != 0;
  RECCL_TRY(checkInt("nChannels", config->nChannels, 0, 16));
  RECCL_TRY(checkInt("timeoutMs", config->timeoutMs, 1, INT_MAX));
  RECCL_TRY(checkInt("bootstrapTimeoutMs", config->bootstrapTimeoutMs, 1, INT_MAX));
  c.nChannels = config->nChannels;
  c.timeoutMs = config->timeoutMs;
  c.bootstrapTimeoutMs = config->bootstrapTimeoutMs;
  if (config->commName) {
    std::string name(config->commName);
    if (name.size() > 128) return Status(Errc::kInvalidArgument, "config.commName: longer than 128 characters");
    c.name = std::move(name);
  }
  c.cudaDevice = inherit.cudaDevice;
  c.homeNic = inherit.homeNic;
  *out = std::move(c);
  return Status::Ok();
}

Status commOptions(const CommConfig& cfg, core::CommOptions* out) {
  RECCL_TRY(core::CommOptions::fromEnv(out));
  out->makeFailover = failover::makeFailover;  // the communicator's failover part (ccl/failover)
  if (cfg.nChannels != CommConfig::kUnset) out->nchannels = cfg.nChannels;
  if (cfg.timeoutMs != CommConfig::kUnset) out->timeoutMs = cfg.timeoutMs;
  if (cfg.bootstrapTimeoutMs != CommConfig::kUnset) out->bootstrapTimeoutMs = cfg.bootstrapTimeoutMs;
  out->homeNic = cfg.homeNic;
  return Status::Ok();
}

CallTicket::CallTicket(recclComm_t comm) noexcept : comm_(comm) {
  // Counted before the check (both sequentially consistent): a close that set `closer` and then
  // read no call inside is one this call sees closing.
  comm_->calls.fetch_add(1);
  if (comm_->closer.load() != kNoClose) release();  // refused: comm_ is null after it
}

CallTicket::~CallTicket() { release(); }

void CallTicket::release() noexcept {
  if (!comm_) return;
  recclComm_t c = std::exchange(comm_, nullptr);
  // Without the lock while no close has begun (every call passes here). Both sequentially
  // consistent: a close that began after this load reads the count after this decrement, and
  // one that began before is seen here and notified, under the lock, since it may free the
  // communicator as soon as it reads zero.
  c->calls.fetch_sub(1);
  if (c->closer.load() == kNoClose) return;
  std::lock_guard lk(c->callsMu);
  c->callsCv.notify_all();
}

recclResult_t refusedClosed() {
  return fail(recclInvalidUsage, "comm: destroyed or aborted (recclCommDestroy / recclCommAbort); no call may follow");
}

Closer beginClose(recclComm_t comm, Closer who) noexcept {
  int before = kNoClose;
  comm->closer.compare_exchange_strong(before, who);
  if (who == kAborting) comm->aborting.store(true, std::memory_order_release);
  return static_cast<Closer>(before);
}

int waitCallsOut(recclComm_t comm, std::chrono::milliseconds limit, bool untilAbortRequest) {
  std::unique_lock lk(comm->callsMu);
  comm->callsCv.wait_for(lk, limit, [&] {
    return comm->calls.load() == 0 || (untilAbortRequest && comm->abortRequested.load());
  });
  return comm->calls.load();
}

void requestAbort(recclComm_t comm) noexcept {
  comm->aborting.store(true, std::memory_order_release);
  {
    std::lock_guard lk(comm->callsMu);
    comm->abortRequested.store(true);
    comm->callsCv.notify_all();
  }
  // A pending init or finalize the destroy waits for (settleMu before the operation's lock, as
  // settle() takes them).
  std::lock_guard lk(comm->settleMu);
  if (auto op = comm->pending) {
    std::lock_guard olk(op->mu);
    op->cv.notify_all();
  }
}

namespace {
// Never destroyed: a late call may look at a shell while static destructors run.
std::mutex& tombstonesMu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::deque<recclComm_t>& tombstones() {
  static auto* list = new std::deque<recclComm_t>;
  return *list;
}
}  // namespace

void bury(recclComm_t comm) {
  comm->buried.store(true);
  {
    std::lock_guard lk(comm->deviceMu);
    comm->device.reset();  // the stream layer runs collectives on impl: it goes first
  }
  comm->impl.reset();
  comm->registrations.clear();
  comm->windows.clear();
  {
    std::lock_guard lk(comm->settleMu);
    comm->pending.reset();
  }
  recclComm_t evicted = nullptr;
  {
    std::lock_guard lk(tombstonesMu());
    tombstones().push_back(comm);
    if (tombstones().size() > kTombstones) {
      evicted = tombstones().front();
      tombstones().pop_front();
    }
  }
  delete evicted;
}

int settle(recclComm_t comm) {
  int st = comm->state.load(std::memory_order_acquire);
  if (st != recclComm::kInitializing && st != recclComm::kFinalizing) return st;
  std::lock_guard lk(comm->settleMu);
  st = comm->state.load(std::memory_order_acquire);
  if (!comm->pending) return st;
  std::unique_lock plk(comm->pending->mu);
  if (!comm->pending->done) return st;
  Status s = comm->pending->status;
  if (st == recclComm::kInitializing) {
    if (s.ok() && comm->pending->made) {
      comm->impl = std::move(comm->pending->made);
      st = recclComm::kReady;
    } else {
      // An init the handle's abort abandoned hands nothing over (its thread frees what it made).
      comm->failure = s.ok() ? Status(Errc::kAborted, "communicator aborted during its init") : s;
      st = recclComm::kFailed;
    }
  } else {
    if (!s.ok()) comm->failure = s;
    st = recclComm::kFinalized;
  }
  plk.unlock();
  comm->pending.reset();
  comm->state.store(st, std::memory_order_release);
  return st;
}

recclResult_t usable(recclComm_t comm, core::Comm** out, bool revokedOk) {
  if (!comm) return fail(recclInvalidArgument, "comm: null communicator");
  switch (settle(comm)) {
    case recclComm::kReady:
      *out = comm->impl.get();
      return recclSuccess;
    case recclComm::kRevoked:
      if (revokedOk) {
        *out = comm->impl.get();
        return recclSuccess;
      }
      return fail(recclInvalidUsage,
                  "comm: revoked (recclCommRevoke); only recclCommShrink, recclCommSplit, recclCommDestroy, recclCommAbort "
                  "and the "
                  "inspecting calls (count, rank, stats, async error) may follow");
    case recclComm::kInitializing:
      return fail(recclInvalidUsage,
                  "comm: its non-blocking init is still running: call recclCommGetAsyncError until it returns "
                  "something other than recclInProgress");
    case recclComm::kFailed: {
      std::lock_guard lk(comm->settleMu);
      return fail(comm->failure.Wrap("comm: its init failed"));
    }
    default:
      return fail(recclInvalidUsage, "comm: finalized (recclCommFinalize); only recclCommDestroy may follow");
  }
}

namespace {

// A non-blocking init's thread: the rendezvous (from `idFrom`, which lets go of what it holds
// once it returned), then the communicator, handed to `op` (or freed, when the handle was
// abandoned meanwhile).
void runPendingInit(const std::shared_ptr<PendingOp>& op, core::CommOptions opts, IdsSource idFrom, int nranks, int rank,
                    std::shared_ptr<core::BootstrapRoot> root, const std::string& who) {
  pthread_setname_np(pthread_self(), "reccl-init");
  // No exception leaves a detached thread: it becomes the init's error (as guarded() does for a
  // call). The source is let go on every way (its hold on a parent with it).
  Result<std::unique_ptr<core::Comm>> c = Status(Errc::kInternal, "init did not run");
  try {
    auto ids = idFrom(op->cancel.get());
    idFrom = nullptr;
    c = ids.ok() ? core::Comm::create(opts, ids->ids, nranks, rank, std::move(root))
                 : Result<std::unique_ptr<core::Comm>>(ids.status());
  } catch (...) {
    idFrom = nullptr;
    c = caughtException();
  }
  std::unique_ptr<core::Comm> orphan;
  {
    std::lock_guard lk(op->mu);
    op->status = c.ok() ? Status::Ok() : c.status().Wrap(who);
    if (c.ok()) {
      if (op->abandoned) orphan = std::move(c).value();
      else op->made = std::move(c).value();
    }
    op->done = true;
  }
  op->cv.notify_all();
  if (orphan) orphan->abort();
}

}  // namespace

recclResult_t startInitAfter(recclComm_t* comm, const CommConfig& cfg, int nranks, int rank, IdSource idFrom,
                             std::shared_ptr<core::BootstrapRoot> root) {
  return startInitFrom(
      comm, cfg, nranks, rank,
      [idFrom = std::move(idFrom)](const std::atomic<bool>* cancel) -> Result<core::RendezvousIds> {
        auto id = idFrom(cancel);
        if (!id.ok()) return id.status();
        core::RendezvousIds ids(std::span(&*id, 1));
        core::wipeKey(id->bootKey);
        return ids;
      },
      std::move(root));
}

recclResult_t startInitFrom(recclComm_t* comm, const CommConfig& cfg, int nranks, int rank, IdsSource idFrom,
                            std::shared_ptr<core::BootstrapRoot> root) {
  core::CommOptions opts;
  if (Status s = commOptions(cfg, &opts); !s.ok()) return fail(s);
  const std::string who = (cfg.name.empty() ? std::string() : "comm " + cfg.name + ": ") + "rank " +
                          std::to_string(rank) + " init";
  auto handle = std::make_unique<recclComm>();
  handle->config = cfg;
  if (handle->config.cudaDevice < 0) handle->config.cudaDevice = callerDevice();  // this thread's, not init's
  if (cfg.blocking) {
    auto ids = idFrom(nullptr);
    idFrom = nullptr;
    if (!ids.ok()) return fail(ids.status());
    auto c = core::Comm::create(opts, ids->ids, nranks, rank, std::move(root));
    if (!c.ok()) return fail(c.status().Wrap(who));
    handle->impl = std::move(c).value();
    *comm = handle.release();
    return recclSuccess;
  }
  auto op = std::make_shared<PendingOp>();
  opts.cancelInit = op->cancel;
  handle->pending = op;
  handle->state.store(recclComm::kInitializing, std::memory_order_release);
  // Detached: recclCommAbort returns without waiting for it, and it releases what it made then.
  std::thread(runPendingInit, op, opts, std::move(idFrom), nranks, rank, std::move(root), who).detach();
  *comm = handle.release();
  return recclInProgress;
}

recclResult_t startInit(recclComm_t* comm, const CommConfig& cfg, int nranks, const core::UniqueIdData& id, int rank,
                        std::shared_ptr<core::BootstrapRoot> root) {
  return startInit(comm, cfg, nranks, std::span(&id, 1), rank, std::move(root));
}

recclResult_t startInit(recclComm_t* comm, const CommConfig& cfg, int nranks, std::span<const core::UniqueIdData> ids,
                        int rank, std::shared_ptr<core::BootstrapRoot> root) {
  // The source's copy of the ids, wiped when the source is let go (after use, or unused).
  auto held = std::make_shared<core::RendezvousIds>(ids);
  return startInitFrom(
      comm, cfg, nranks, rank, [held](const std::atomic<bool>*) -> Result<core::RendezvousIds> { return *held; },
      std::move(root));
}

Result<uint32_t> bootstrapAddress() {
  auto nics = core::listNics();
  std::string want = params::BootstrapIfname();
  uint32_t addr = htonl(INADDR_LOOPBACK);
  bool found = false;
  for (const auto& n : core::selectNics(nics, want.empty() ? "^=lo" : "=" + want, "")) {
    addr = n.addr;
    found = true;
    break;
  }
  if (!want.empty() && !found)
    return Status(Errc::kInvalidArgument, "RECCL_BOOTSTRAP_IFNAME=" + want + " names no interface with an IPv4 address");
  return addr;
}

Result<core::UniqueIdData> startDetachedRoot() {
  RECCL_ASSIGN_OR_RETURN(uint32_t addr, bootstrapAddress());
  // A random bootstrap key: whoever the application hands the id to may join.
  core::UniqueIdData id;
  id.jobId = randomU64();
  id.bootKey = core::randomKey();
  transport::Endpoint bound;
  core::BootstrapConfig cfg;
  cfg.addr = addr;
  cfg.jobId = id.jobId;
  cfg.bootKey = id.bootKey;
  cfg.deadline = Deadline::afterMs(params::BootstrapTimeoutMs() + core::kRootGraceMs);
  auto root = core::BootstrapRoot::start(cfg, &bound);
  if (!root.ok()) return root.status().Wrap("bootstrap root");
  id.addr = bound.addr;
  id.port = bound.port;
  return id;
}

}  // namespace reccl::api
