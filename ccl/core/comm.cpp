#include "core/comm.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cinttypes>
#include <cstring>

#include "core/bootstrap.h"
#include "core/comm_transport.h"
#include "core/handshake.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"
#include "transport/shm_ring.h"
#include "transport/socket_paths.h"

namespace reccl::core {
namespace {
// How long breakComm tries for a port map that another thread holds (Comm::breakComm).
constexpr int kBreakLockMs = 50;
}  // namespace

Status CommOptions::fromEnv(CommOptions* o) {
  // Every RECCL_* variable against its type and range (params.def), on every rank, before
  // anything starts: a bad value is an error naming it, never a default in disguise.
  RECCL_TRY(params::validateAll());
  o->chunkBytes = static_cast<size_t>(params::ChunkSize());
  o->slots = static_cast<uint32_t>(params::Slots());
  o->nchannels = static_cast<int>(params::NChannels());
  o->channelThreads = static_cast<int>(params::ChannelThreads());
  o->shmDisable = params::ShmDisable();
  o->timeoutMs = params::TimeoutMs();
  o->bootstrapTimeoutMs = params::BootstrapTimeoutMs();
  o->nics = params::Nics();
  o->smallMsgBytes = static_cast<size_t>(params::SmallMsgBytes());
  o->directRecvMinBytes = static_cast<size_t>(params::DirectRecvMinBytes());
  o->directSendMinBytes = static_cast<size_t>(params::DirectSendMinBytes());
  o->algo = params::Algo();
  return Status::Ok();
}

Result<std::unique_ptr<Comm>> Comm::create(const CommOptions& opts, std::span<const UniqueIdData> ids, int nranks,
                                            int rank, std::shared_ptr<BootstrapRoot> root) {
  std::unique_ptr<Comm> c(new Comm());
  c->opts_ = opts;
  c->root_ = std::move(root);
  Status s = c->init(ids, nranks, rank);
  if (!s.ok()) {
    c->env_.aborted.store(true);
    c->broken_.store(true);
    return s;
  }
  if (c->root_) c->root_->onLateClaim([raw = c.get()](const Status& why) { raw->breakComm(why); });
  return c;
}

Status Comm::init(std::span<const UniqueIdData> ids, int nranks, int rank) {
  rank_ = rank;
  nranks_ = nranks;
  env_.waitSpinNs = std::max<int64_t>(0, params::WaitSpinUs()) * 1000;
  const Deadline deadline = connectDeadline();  // init's: cancellable

  static std::once_flag sweep;
  std::call_once(sweep, [] { transport::removeStaleShm(); });
  RECCL_ASSIGN_OR_RETURN(listen_, transport::listenTcp(htonl(INADDR_ANY), 0, &dataEp_));
  stopEvent_.reset(eventfd(0, EFD_CLOEXEC));
  if (!stopEvent_) return Status::FromErrno(errno, "eventfd");
  RECCL_ASSIGN_OR_RETURN(engine_, transport::SocketEngine::create("reccl-progress"));

  auto makeInfo = [&](uint32_t localAddr) -> Result<RankInfo> {
    auto all = listNics();
    std::string bootNic = nicWithAddress(all, localAddr);
    myNics_ = selectNics(all, opts_.nics, bootNic);
    if (myNics_.empty())
      return Status(Errc::kInvalidArgument, "RECCL_NICS=" + opts_.nics + " matches no usable interface");
    RankInfo info;
    info.rank = rank;
    info.hostId = hostIdentity();
    info.hostName = hostName();
    info.pid = static_cast<uint32_t>(getpid());
    info.dataPort = dataEp_.port;
    info.chunkBytes = static_cast<uint32_t>(opts_.chunkBytes);
    info.slots = opts_.slots;
    info.nchannels = opts_.nchannels;
    info.flags = opts_.shmDisable ? kFlagShmDisable : 0;
    info.cpus = static_cast<uint16_t>(std::min(usableCpus(), 65535));
    info.onlineCpus = static_cast<uint16_t>(std::clamp<long>(sysconf(_SC_NPROCESSORS_ONLN), 0, 65535));
    info.channelThreads = opts_.channelThreads;
    info.nics = myNics_;
    if (!opts_.homeNic.empty()) {
      info.homeRail = static_cast<int16_t>(nicIndex(myNics_, opts_.homeNic));
      if (info.homeRail < 0) {
        std::string have;
        for (const auto& n : myNics_) have += (have.empty() ? "" : ", ") + n.name;
        RECCL_WARN(kLogInit, "rank %d: home NIC %s is not among the NICs this rank uses (%s): its channels start where its local rank's do",
                   rank, opts_.homeNic.c_str(), have.c_str());
      }
    }
    RECCL_TRY(fillTransportReport(&info, myNics_));
    return info;
  };
  // A root in this process (the communicator's, or recclGetUniqueId's for this rank's block)
  // knows who kept a timed-out bootstrap waiting; the other ranks cannot. Held from here: a root
  // nobody holds may end with this rank's close.
  std::shared_ptr<BootstrapRoot> localRoot = root_;
  if (!localRoot && !ids.empty() && rank >= 0 && rank < nranks) {
    const auto& mine = ids[blockOfRank(nranks, static_cast<int>(ids.size()), rank)];
    localRoot = BootstrapRoot::inThisProcess(mine.jobId, mine.port);
  }
  auto exchanged = bootstrapExchange(ids, rank, nranks, makeInfo, deadline);
  if (!exchanged.ok()) {
    std::string missing =
        exchanged.status().code() == Errc::kTimeout && localRoot ? localRoot->whoIsMissing() : "";
    if (missing.empty()) return exchanged.status();
    return Status(Errc::kTimeout, exchanged.status().message() + " (the root in this process: " + missing + ")");
  }
  BootstrapResult boot = std::move(exchanged).value();
  table_ = std::move(boot.table);
  key_ = boot.comm.key;
  commId_ = boot.comm.commId;
  wipeKey(boot.comm.key);
  topo_ = computeTopology(table_, rank);
  if (table_[rank].homeRail >= topo_.nrails)
    RECCL_WARN(kLogInit, "rank %d: home NIC %s is rail %d, past the %d rail(s) every rank has: its channels start where its local rank's do",
               rank, opts_.homeNic.c_str(), table_[rank].homeRail, topo_.nrails);
  // Rank 0's slot geometry wins, so every connection has the same shape on both ends.
  opts_.chunkBytes = table_[0].chunkBytes;
  opts_.slots = table_[0].slots;
  const RankInfo& me = table_[rank];
  RECCL_INFO(kLogInit,
             "rank %d/%d: %d hosts, local rank %d/%d, %d rails, %d channels on %d thread(s) (this rank: %u usable "
             "CPUs, %u online, %d ranks on this machine, asks for %d), chunk %zu, slots %u",
             rank, nranks, topo_.nhosts, topo_.localRank, topo_.localNranks, topo_.nrails, topo_.nchannels,
             topo_.channelThreads, me.cpus, me.onlineCpus, topo_.machineNranks,
             rankChannelThreads(me, topo_.machineNranks), opts_.chunkBytes, opts_.slots);

  // The calling thread runs a collective's channel 0; the workers take the others in channel
  // order (see runParallel).
  for (int i = 1; i < topo_.channelThreads; ++i) {
    workers_.emplace_back([this] {
      std::unique_lock lk(workMu_);
      for (;;) {
        workCv_.wait(lk, [&] { return stopWorkers_ || !work_.empty(); });
        if (stopWorkers_) return;
        auto fn = std::move(work_.front());
        work_.pop_front();
        lk.unlock();
        fn();
        lk.lock();
      }
    });
  }

  // The TCP paths failover asks for: from this rank's NIC on a rail to a peer's on that rail.
  transport::SocketPathFactoryConfig pc;
  pc.engine = engine_.get();
  for (const auto& n : myNics_) {
    pc.nicName.push_back(n.name);
    pc.nicAddr.push_back(n.addr);
  }
  for (const auto& ri : table_) {
    std::vector<uint32_t> addrs;
    for (const auto& n : ri.nics) addrs.push_back(n.addr);
    pc.peerNic.push_back(std::move(addrs));
    pc.peerPort.push_back(ri.dataPort);
  }
  pc.linkPriority = static_cast<int>(params::FailoverSocketPriority());
  paths_ = std::make_unique<transport::SocketPathFactory>(std::move(pc));
  // Every rank decides alike from the table (rank 0's RECCL_TRANSPORT, every rank's report).
  {
    RECCL_ASSIGN_OR_RETURN(TransportChoice tc, chooseTransport(table_));
    RECCL_INFO(kLogInit, "rank %d: transport %s", rank, tc.why.c_str());
    if (tc.verbs) {
      auto v = makeVerbsPaths(paths_.get(), myNics_);
      if (!v.ok()) return v.status().Wrap("rank " + std::to_string(rank) + ": verbs transport");
      verbs_ = std::move(v).value();
    }
  }

  // Failover: monitor thread and the path-failure hook, before any connection exists.
  // RECCL_FAILOVER=0 leaves it out (the bookkeeping benchmark's baseline): a path fault then
  // latches on its port and fails the communicator.
  if (params::Failover() && opts_.makeFailover) {
    RECCL_ASSIGN_OR_RETURN(failover_, opts_.makeFailover(*this));
  }
  // Peers connect as soon as they hold the table; until now their connections waited in the
  // listen backlog: without the key no hello can be checked, and the listener reads the slot
  // geometry (opts_) and failover_ (a migration or standby hello goes there), set just above.
  listener_ = std::thread([this] { listenLoop(); });

  // The ring's connections are made up front (errors show at init); others on first use.
  if (nranks > 1) {
    int next = (rank + 1) % nranks;
    int prev = (rank + nranks - 1) % nranks;
    for (int ch = 0; ch < topo_.nchannels; ++ch) RECCL_TRY(sendPort(next, ch).status());
    for (int ch = 0; ch < topo_.nchannels; ++ch) RECCL_TRY(recvPort(prev, ch).status());
  }
  initialized_ = true;
  return Status::Ok();
}

Comm::~Comm() {
  if (root_) root_->stop();  // its late-claim hook points here
  if (!broken_.load() && engine_) flushSends();
  if (listener_.joinable()) {
    uint64_t one = 1;
    [[maybe_unused]] auto n = write(stopEvent_.get(), &one, sizeof(one));
    listener_.join();
  }
  dropShrinkNotes();  // after the listener: nothing adds one any more
  // After the listener (it hands migrated paths over) and before the engine (its migrations
  // retire paths through it): once stop() returns, its hook is out (no path thread reaches it any
  // more) and its threads are joined.
  if (failover_) failover_->stop();
  {
    std::lock_guard lk(workMu_);
    stopWorkers_ = true;
  }
  workCv_.notify_all();
  for (auto& t : workers_) t.join();
  if (engine_) engine_->stop();
  if (verbs_) verbs_->stop();
  sends_.clear();
  recvs_.clear();
  {
    std::lock_guard lk(inMu_);
    incoming_.clear();
  }
  failover_.reset();  // after everything that could have called into it
  verbs_.reset();      // registrations and devices, after every QP (with the ports) went
  paths_.reset();
  engine_.reset();
  wipeKey(key_);
}

void Comm::flushSends() {
  // Steps this rank posted last may still sit in its slots; peers need them, so wait until every
  // receiver acknowledged them (bounded).
  Deadline d = Deadline::afterMs(std::min<int64_t>(opts_.timeoutMs, 10000));
  {
    // The acks this rank batched go out first: the peers wait for them in their own flush.
    std::lock_guard lk(recvMu_);
    for (auto& [key, port] : recvs_) {
      while (!port->failed() && port->path() && !port->path()->flush() && !d.expired())
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  std::lock_guard lk(sendMu_);
  for (auto& [key, port] : sends_) {
    auto* c = port->counters();
    while (!port->failed() && port->acked() < port->posted() && !d.expired()) {
      uint32_t seen = c->toSender.sample();
      if (port->acked() >= port->posted()) break;
      c->toSender.sleep(seen, std::chrono::milliseconds(5));
    }
  }
}

void Comm::forEachPort(const std::function<void(channel::PortBase&)>& fn) {
  {
    std::lock_guard lk(sendMu_);
    for (auto& [k, p] : sends_) fn(*p);
  }
  std::lock_guard lk(recvMu_);
  for (auto& [k, p] : recvs_) fn(*p);
}

bool Comm::portCount(size_t* n) {
  std::unique_lock sl(sendMu_, std::try_to_lock);
  std::unique_lock rl(recvMu_, std::try_to_lock);
  *n = (sl.owns_lock() ? sends_.size() : 0) + (rl.owns_lock() ? recvs_.size() : 0);
  return sl.owns_lock() && rl.owns_lock();
}

FailoverHost::PortWalk Comm::ports() {
  PortWalk w;
  {
    std::unique_lock sl(sendMu_, std::try_to_lock);
    if (sl.owns_lock()) {
      w.total += sends_.size();
      for (auto& [k, p] : sends_)
        if (auto it = sendRail_.find(k); it != sendRail_.end())
          w.ports.push_back({p.get(), k.first, k.second, true, it->second});
    } else {
      w.whole = false;
    }
  }
  std::unique_lock rl(recvMu_, std::try_to_lock);
  if (rl.owns_lock()) {
    w.total += recvs_.size();
    for (auto& [k, p] : recvs_)
      if (auto it = recvRail_.find(k); it != recvRail_.end())
        w.ports.push_back({p.get(), k.first, k.second, false, it->second});
  } else {
    w.whole = false;
  }
  return w;
}

void Comm::breakComm(const Status& s) {
  {
    std::lock_guard lk(errMu_);
    if (broken_.load()) return;
    fatal_ = s;
    broken_.store(true);
  }
  env_.broken.store(true);  // what the peers close now is this failure's doing, not theirs
  // Every wait on the ports ends with it from here on, whether or not the loop below reaches
  // their port (they look at least every 20 ms).
  env_.commFailure.latch(s);
  RECCL_WARN(kLogColl, "rank %d: communicator failed: %s", rank_, s.message().c_str());
  {
    std::lock_guard lk(dialMu_);
    for (int fd : dialing_) ::shutdown(fd, SHUT_RDWR);
  }
  inCv_.notify_all();  // a recvPort waiting for a connection gives recvMu_ back
  // Fail every connection and close its path so the peers see it now rather than at their
  // timeout. Ports may be mid-creation in another thread; the maps' locks keep this safe. They
  // are only try-locked (this may run while a lazy connect holds one for its whole connect), and
  // retried for a while: the failover's port walk and a call's port lookup hold them for
  // microseconds. A map still held then (a lazy connect's dial, up to a stall time per rail) is
  // left to its holder, which fails and closes its ports before it gives it back
  // (closePortsLeftOpen); whichever takes the map first does it.
  sendsLeftOpen_.store(true);
  recvsLeftOpen_.store(true);
  // Closes a map's ports if its lock is free now; whether it was.
  auto closeIfFree = [&](std::mutex& mu, std::atomic<bool>& leftOpen, auto& ports) {
    std::unique_lock l(mu, std::try_to_lock);
    if (l.owns_lock()) closePortsLeftOpen(leftOpen, ports, s);
    return l.owns_lock();
  };
  bool sendsDone = false, recvsDone = false;
  const Deadline d = Deadline::afterMs(kBreakLockMs);
  for (;;) {
    sendsDone = sendsDone || closeIfFree(sendMu_, sendsLeftOpen_, sends_);
    recvsDone = recvsDone || closeIfFree(recvMu_, recvsLeftOpen_, recvs_);
    if ((sendsDone && recvsDone) || d.expired()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!sendsDone || !recvsDone)
    RECCL_INFO(kLogColl, "rank %d: the %s port map stayed held %d ms; its holder closes the ports", rank_,
               !sendsDone && !recvsDone ? "send and receive" : !sendsDone ? "send" : "receive", kBreakLockMs);
}

Status Comm::run(const std::function<Status()>& op) {
  // Counted before the check: abort() sets broken_ and then waits for the count, so a call that
  // saw broken_ clear is one abort waits for.
  active_.fetch_add(1);
  if (broken_.load()) {
    Status fatal = asyncError();
    std::lock_guard lk(activeMu_);
    active_.fetch_sub(1);
    activeCv_.notify_all();
    return fatal;
  }
  Status s = op();
  if (!s.ok()) breakComm(s);
  else collectives_.fetch_add(1, std::memory_order_relaxed);
  // Notify under the lock: abort() may free this communicator as soon as it sees zero.
  std::lock_guard lk(activeMu_);
  active_.fetch_sub(1);
  activeCv_.notify_all();
  return s;
}

void Comm::stop(const Status& why) {
  env_.aborted.store(true);
  // Ends every wait (PortEnv::commFailure, the ports it fails), now or at the earlier failure; it
  // never waits for a map a lazy connect holds: recclCommRevoke runs from a watchdog while calls wait.
  breakComm(why);
}

void Comm::revoke() {
  env_.revoked.store(true);
  stop(Status(Errc::kAborted, "communicator revoked (recclCommRevoke)"));
}

void Comm::abort() {
  stop(Status(Errc::kAborted, "communicator aborted"));
  std::unique_lock lk(activeMu_);
  activeCv_.wait_for(lk, std::chrono::seconds(10), [&] { return active_.load() == 0; });
}

Status Comm::asyncError() const {
  std::lock_guard lk(errMu_);
  return fatal_;
}

CommStats Comm::stats() const {
  CommStats s;
  s.collectives = collectives_.load();
  if (engine_) {
    s.bytesSent = engine_->bytesSent.load();
    s.bytesReceived = engine_->bytesReceived.load();
  }
  s.duplicateSteps = env_.duplicateSteps.load();
  s.lastMigrationFirstStepNs = env_.lastMigrationFirstStepNs.load();
  s.lastMigrationResumeNs = env_.lastMigrationResumeNs.load();
  s.lastFaultMoveFirstStepNs = env_.lastFaultMoveFirstStepNs.load();
  s.lastFaultMoveResumeNs = env_.lastFaultMoveResumeNs.load();
  s.lostConnections = env_.lostConnections.load();
  s.firstLostPeer = env_.firstLostPeer.load();
  s.railsTotal = static_cast<uint32_t>(topo_.nrails);
  s.railsUp = s.railsTotal;
  if (failover_) failover_->fillStats(&s);
  return s;
}

uint64_t Comm::progressMark() {
  // Any step posted, received, applied or acked on any connection moves this sum.
  uint64_t sum = 0;
  forEachPort([&](channel::PortBase& p) {
    auto* c = p.counters();
    sum += c->posted.load(std::memory_order_relaxed) + c->consumed.load(std::memory_order_relaxed);
  });
  return sum;
}

Status Comm::runParallel(int n, const std::function<Status(int)>& fn) {
  if (n <= 1 || workers_.empty()) {
    for (int i = 0; i < n; ++i) RECCL_TRY(fn(i));
    return Status::Ok();
  }
  // What the work items share with this call lives in a shared block, so an item that ends after
  // this call gave up on it writes into live memory; `fn` is copied in (the collectives capture
  // by value) for the same reason. Fields other than results[0] are guarded by workMu_.
  struct Batch {
    std::function<Status(int)> fn;
    std::vector<Status> results;
    int pending = 0;      // items not finished (running or queued)
    int running = 0;      // items inside fn
    bool cancelled = false;  // items not started yet return without running fn
    bool abandoned = false;  // this call returned: a running item settles active_ when it ends
  };
  auto batch = std::make_shared<Batch>();
  batch->fn = fn;
  batch->results.resize(n);
  batch->pending = n - 1;
  {
    std::lock_guard lk(workMu_);
    for (int i = 1; i < n; ++i) {
      work_.push_back([this, batch, i] {
        {
          std::lock_guard l1(workMu_);
          if (batch->cancelled) {
            batch->results[i] = Status(Errc::kAborted, "channel " + std::to_string(i) + " cancelled");
            --batch->pending;
            doneCv_.notify_all();
            return;
          }
          ++batch->running;
        }
        Status s = batch->fn(i);
        if (!s.ok()) breakComm(s);  // wakes the other channels instead of letting them time out
        std::lock_guard l2(workMu_);
        batch->results[i] = std::move(s);
        --batch->running;
        --batch->pending;
        doneCv_.notify_all();
        if (batch->abandoned) {
          // Counted in active_ since the call returned: abort() and destruction wait for it.
          std::lock_guard la(activeMu_);
          active_.fetch_sub(1);
          activeCv_.notify_all();
        }
      });
    }
  }
  workCv_.notify_all();
  batch->results[0] = batch->fn(0);
  if (!batch->results[0].ok()) breakComm(batch->results[0]);

  // The workers run the other channels; every wait in them ends at its own step deadline or at
  // once when a port fails. This wait is bounded the same way: RECCL_TIMEOUT_MS without any
  // step moving on any connection fails the communicator (which fails every port, so the
  // workers return at once), and the workers then get one more RECCL_TIMEOUT_MS to return.
  const auto window = std::chrono::milliseconds(opts_.timeoutMs);
  uint64_t mark = progressMark();
  bool broke = false;
  std::unique_lock lk(workMu_);
  for (;;) {
    if (doneCv_.wait_for(lk, window, [&] { return batch->pending == 0; })) break;
    lk.unlock();
    uint64_t now = progressMark();
    bool moved = now != mark;
    mark = now;
    if (!broke && (!moved || broken_.load())) {
      breakComm(Status(Errc::kTimeout, "rank " + std::to_string(rank_) + ": " + std::to_string(n - 1) +
                                           " channel worker(s) made no progress for " +
                                           std::to_string(opts_.timeoutMs) + " ms (RECCL_TIMEOUT_MS)"));
      broke = true;
      lk.lock();
      batch->cancelled = true;  // items still queued never start
      continue;
    }
    lk.lock();
    if (!broke) continue;
    if (batch->pending == 0) break;
    // Broken for a whole window and a worker is still inside fn: it must not be waited for
    // forever. It runs on the shared block and the comm (destruction joins the workers); the
    // active_ count keeps abort() and destruction waiting for it like for any call in flight.
    batch->abandoned = true;
    {
      std::lock_guard la(activeMu_);
      active_.fetch_add(batch->running);
    }
    RECCL_WARN(kLogColl, "rank %d: %d channel worker(s) still running %lld ms after the communicator failed", rank_,
               batch->running, static_cast<long long>(opts_.timeoutMs));
    return Status(Errc::kTimeout, "rank " + std::to_string(rank_) + ": " + std::to_string(batch->running) +
                                      " channel worker(s) did not stop within " + std::to_string(opts_.timeoutMs) +
                                      " ms after the communicator failed");
  }
  for (auto& r : batch->results)
    if (!r.ok()) return r;
  return Status::Ok();
}

}  // namespace reccl::core
