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
#include "core/handshake.h"
#include "failover/failover.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"
#include "transport/shm_ring.h"
#include "transport/socket_paths.h"

namespace reccl::core {
namespace {

constexpr auto kHelloGrace = std::chrono::seconds(5);
constexpr uint32_t kFlagShmDisable = 1;

std::string hex32(uint64_t v) {
  char buf[16];
  snprintf(buf, sizeof(buf), "%08" PRIx32, static_cast<uint32_t>(v));
  return buf;
}

Status sendHelloAndWait(int fd, const Hello& h, const Key& key, Deadline d, HelloReply* reply) {
  ByteIo io = socketIo(fd, d);
  RECCL_ASSIGN_OR_RETURN(Session session, sendAuthHello(io, h, key, AuthPurpose::kData));
  RECCL_TRY(readProof(io, key, session).Wrap("rank " + std::to_string(h.dstRank)));
  std::array<std::byte, kHelloReplyBytes> rb;
  RECCL_TRY(transport::recvAll(fd, rb, d).Wrap("hello reply from rank " + std::to_string(h.dstRank)));
  RECCL_ASSIGN_OR_RETURN(*reply, decodeHelloReply(rb));
  if (reply->status != ReplyStatus::kOk)
    return Status(Errc::kPeerFailure, "rank " + std::to_string(h.dstRank) + " refused the connection (status " +
                                          std::to_string(static_cast<uint32_t>(reply->status)) + ")");
  return Status::Ok();
}

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

Result<std::unique_ptr<Comm>> Comm::create(const CommOptions& opts, const UniqueIdData& id, int nranks, int rank,
                                            std::shared_ptr<BootstrapRoot> root) {
  std::unique_ptr<Comm> c(new Comm());
  c->opts_ = opts;
  c->root_ = std::move(root);
  Status s = c->init(id, nranks, rank);
  if (!s.ok()) {
    c->env_.aborted.store(true);
    c->broken_.store(true);
    return s;
  }
  if (c->root_) c->root_->onLateClaim([raw = c.get()](const Status& why) { raw->breakComm(why); });
  return c;
}

Status Comm::init(const UniqueIdData& id, int nranks, int rank) {
  rank_ = rank;
  nranks_ = nranks;
  env_.waitSpinNs = std::max<int64_t>(0, params::WaitSpinUs()) * 1000;
  Deadline deadline = Deadline::afterMs(opts_.bootstrapTimeoutMs);

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
    return info;
  };
  transport::Endpoint root{id.addr, id.port};
  RECCL_ASSIGN_OR_RETURN(BootstrapResult boot, bootstrapExchange(root, id, rank, nranks, makeInfo, deadline));
  table_ = std::move(boot.table);
  key_ = boot.comm.key;
  commId_ = boot.comm.commId;
  wipeKey(boot.comm.key);
  topo_ = computeTopology(table_, rank);
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

  // Failover: monitor thread and the path-failure hook, before any connection exists.
  // RECCL_FAILOVER=0 leaves it out (the bookkeeping benchmark's baseline): a path fault then
  // latches on its port and fails the communicator.
  if (params::Failover()) {
    RECCL_ASSIGN_OR_RETURN(failover_, failover::Failover::create(*this));
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
  failover_.reset();  // after the listener (it hands migrated paths over) and before the engine
  {
    std::lock_guard lk(workMu_);
    stopWorkers_ = true;
  }
  workCv_.notify_all();
  for (auto& t : workers_) t.join();
  if (engine_) engine_->stop();
  sends_.clear();
  recvs_.clear();
  {
    std::lock_guard lk(inMu_);
    incoming_.clear();
  }
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

void Comm::breakComm(const Status& s) {
  {
    std::lock_guard lk(errMu_);
    if (broken_.load()) return;
    fatal_ = s;
    broken_.store(true);
  }
  RECCL_WARN(kLogColl, "rank %d: communicator failed: %s", rank_, s.message().c_str());
  // Fail every connection and close its path so the peers see it now rather than at their
  // timeout. Ports may be mid-creation in another thread; the maps' locks keep this safe.
  std::unique_lock sl(sendMu_, std::try_to_lock);
  std::unique_lock rl(recvMu_, std::try_to_lock);
  auto fail = [&](channel::PortBase& p) {
    p.fail(s);
    if (p.path()) p.path()->shutdown();
  };
  if (sl.owns_lock())
    for (auto& [k, p] : sends_) fail(*p);
  if (rl.owns_lock())
    for (auto& [k, p] : recvs_) fail(*p);
  inCv_.notify_all();
}

Status Comm::run(const std::function<Status()>& op) {
  if (broken_.load()) {
    std::lock_guard lk(errMu_);
    return fatal_;
  }
  active_.fetch_add(1);
  Status s = op();
  if (!s.ok()) breakComm(s);
  else collectives_.fetch_add(1, std::memory_order_relaxed);
  // Notify under the lock: abort() may free this communicator as soon as it sees zero.
  std::lock_guard lk(activeMu_);
  active_.fetch_sub(1);
  activeCv_.notify_all();
  return s;
}

void Comm::abort() {
  env_.aborted.store(true);
  breakComm(Status(Errc::kAborted, "communicator aborted"));
  forEachPort([](channel::PortBase& p) { p.wakeAll(); });
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

Result<channel::SendPort*> Comm::sendPort(int peer, int channel) {
  std::lock_guard lk(sendMu_);
  auto key = PortKey(peer, channel);
  if (auto it = sends_.find(key); it != sends_.end()) return it->second.get();
  if (broken_.load()) return asyncError();
  if (peer < 0 || peer >= nranks_ || peer == rank_ || channel < 0 || channel >= topo_.nchannels)
    return Status(Errc::kInternal, "sendPort: bad peer or channel");
  Deadline d = connectDeadline();
  const RankInfo& pi = table_[peer];
  bool shm = topo_.hostOf[peer] == topo_.hostOf[rank_] && !opts_.shmDisable && !(pi.flags & kFlagShmDisable);
  Hello h;
  h.jobId = 0;
  h.commId = commId_;
  h.srcRank = rank_;
  h.dstRank = peer;
  h.nranks = nranks_;
  h.channel = static_cast<uint32_t>(channel);
  std::string desc;
  channel::ConnMemory mem;
  UniqueFd fd;
  std::string shmName;
  if (shm) {
    shmName = "/reccl-" + std::to_string(getpid()) + "-" + hex32(commId_) + "-" + std::to_string(rank_) + "-" +
              std::to_string(peer) + "-" + std::to_string(channel) + "-" + std::to_string(shmSerial_.fetch_add(1));
    // Connect first: the named segment exists only while the peer is known to be there.
    transport::Endpoint dst{pi.nics[0].addr, pi.dataPort};
    auto c = transport::connectTcp(dst, 0, "", d);
    if (!c.ok()) return c.status().Wrap("connecting to rank " + std::to_string(peer));
    fd = std::move(c).value();
    RECCL_ASSIGN_OR_RETURN(mem, transport::createShm(shmName, opts_.slots, opts_.chunkBytes));
    h.kind = HelloKind::kShmData;
    h.shmName = shmName;
    desc = "shm rank " + std::to_string(rank_) + "->" + std::to_string(peer) + " ch " + std::to_string(channel);
  } else {
    int rail = railFor(topo_, rank_, channel);
    if (failover_) rail = failover_->railForNewConnection(peer, rail);  // avoids rails known down
    const NicInfo& src = myNics_[rail];
    transport::Endpoint dst{pi.nics[rail].addr, pi.dataPort};
    RECCL_ASSIGN_OR_RETURN(fd, transport::connectTcp(dst, src.addr, src.name == "lo" ? "" : src.name, d));
    transport::tuneDataSocket(fd.get(), src.name);
    RECCL_ASSIGN_OR_RETURN(mem, channel::ConnMemory::anonymous(opts_.slots, opts_.chunkBytes));
    h.kind = HelloKind::kTcpData;
    desc = "tcp " + src.name + " rank " + std::to_string(rank_) + "->" + std::to_string(peer) + " ch " +
           std::to_string(channel) + " (" + dst.str() + ")";
  }
  HelloReply reply;
  Status s = sendHelloAndWait(fd.get(), h, key_, d, &reply);
  if (shm) transport::unlinkShm(shmName);  // the peer unlinked it already; this covers failures
  RECCL_TRY(s.Wrap("connecting to rank " + std::to_string(peer)));
  auto port = std::make_unique<channel::SendPort>(channel::PortId{rank_, peer, channel}, std::move(mem), &env_);
  if (shm) {
    port->setPath(std::make_unique<transport::ShmPath>(engine_.get(), std::move(fd), port.get(), true, desc));
  } else {
    auto path = std::make_unique<transport::SocketSendPath>(engine_.get(), std::move(fd), port.get(), desc);
    auto* raw = path.get();
    port->setPath(std::move(path));
    raw->start();
  }
  RECCL_INFO(kLogNet, "connected %s", desc.c_str());
  auto* out = port.get();
  sends_.emplace(key, std::move(port));
  return out;
}

Result<channel::RecvPort*> Comm::recvPort(int peer, int channel) {
  std::lock_guard lk(recvMu_);
  auto key = PortKey(peer, channel);
  if (auto it = recvs_.find(key); it != recvs_.end()) return it->second.get();
  if (broken_.load()) return asyncError();
  if (peer < 0 || peer >= nranks_ || peer == rank_ || channel < 0 || channel >= topo_.nchannels)
    return Status(Errc::kInternal, "recvPort: bad peer or channel");
  Deadline d = connectDeadline();
  Incoming in;
  {
    // Waits for the peer's connection; gives up early when our other connection with that peer
    // already failed (the peer is gone or broke its communicator).
    auto peerFailed = [&]() -> Status {
      std::lock_guard sl(sendMu_);
      for (auto& [k, p] : sends_)
        if (k.first == peer && p->failed()) return p->error();
      return Status::Ok();
    };
    std::unique_lock il(inMu_);
    bool ok = false;
    while (!(ok = incoming_.count(key) > 0) && !broken_.load() && !d.expired()) {
      inCv_.wait_for(il, std::chrono::milliseconds(10));
      if (incoming_.count(key)) continue;
      il.unlock();
      Status pf = peerFailed();
      il.lock();
      if (!pf.ok()) return pf;
    }
    if (broken_.load()) return asyncError();
    if (!ok)
      return Status(Errc::kTimeout, "rank " + std::to_string(peer) + " did not connect on channel " +
                                        std::to_string(channel) + " before the deadline");
    in = std::move(incoming_[key]);
    incoming_.erase(key);
  }
  std::string desc = std::string(in.hello.kind == HelloKind::kShmData ? "shm" : "tcp") + " rank " +
                     std::to_string(peer) + "->" + std::to_string(rank_) + " ch " + std::to_string(channel);
  std::unique_ptr<channel::RecvPort> port;
  if (in.hello.kind == HelloKind::kShmData) {
    port = std::make_unique<channel::RecvPort>(channel::PortId{rank_, peer, channel}, std::move(in.shm), &env_);
    port->setPath(std::make_unique<transport::ShmPath>(engine_.get(), std::move(in.fd), port.get(), false, desc));
  } else {
    RECCL_ASSIGN_OR_RETURN(auto mem, channel::ConnMemory::anonymous(opts_.slots, opts_.chunkBytes));
    transport::tuneDataSocket(in.fd.get(), "");
    port = std::make_unique<channel::RecvPort>(channel::PortId{rank_, peer, channel}, std::move(mem), &env_);
    auto path = std::make_unique<transport::SocketRecvPath>(engine_.get(), std::move(in.fd), port.get(), desc);
    auto* raw = path.get();
    port->setPath(std::move(path));
    raw->start();
  }
  auto* out = port.get();
  recvs_.emplace(key, std::move(port));
  return out;
}

void Comm::listenLoop() {
  pthread_setname_np(pthread_self(), "reccl-listener");
  struct Pending {
    UniqueFd fd;
    Nonce serverNonce{};
    std::vector<std::byte> buf;
    Deadline by = Deadline::never();
  };
  std::vector<Pending> pending;
  auto refuse = [&](Pending& p, const std::string& why) {
    refused_.fetch_add(1);
    if (!why.empty()) RECCL_WARN(kLogNet, "rank %d refused a data connection: %s", rank_, why.c_str());
    p.fd.reset();
  };
  for (;;) {
    std::vector<pollfd> pfds;
    pfds.push_back({stopEvent_.get(), POLLIN, 0});
    pfds.push_back({listen_.get(), POLLIN, 0});
    for (auto& p : pending) pfds.push_back({p.fd.get(), POLLIN, 0});
    int rc = poll(pfds.data(), pfds.size(), 100);
    if (rc < 0 && errno != EINTR) {
      RECCL_WARN(kLogNet, "data listener poll: %s", strerror(errno));
      return;
    }
    if (pfds[0].revents & POLLIN) return;
    size_t npoll = pending.size();
    if (pfds[1].revents & POLLIN) {
      UniqueFd fd(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (fd) {
        auto nonce = sendChallenge(fd.get(), AuthPurpose::kData);
        if (nonce.ok()) pending.push_back({std::move(fd), *nonce, {}, Deadline::after(kHelloGrace)});
      }
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      auto& p = pending[i];
      if (!p.fd) continue;
      if (p.by.expired()) {
        refuse(p, "no hello in time");
        continue;
      }
      if (i >= npoll || !(pfds[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      std::byte tmp[kAuthHelloBytes];
      ssize_t n = recv(p.fd.get(), tmp, kAuthHelloBytes - p.buf.size(), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        refuse(p, "");
        continue;
      }
      if (n < 0) continue;
      p.buf.insert(p.buf.end(), tmp, tmp + n);
      if (p.buf.size() < kAuthHelloBytes) continue;
      auto h = openAuthHello(p.buf, key_, p.serverNonce);
      Status s = h.ok() ? acceptHello(*h, commId_, nranks_, rank_) : h.status();
      if (s.ok() && h->kind == HelloKind::kBootstrap) s = Status(Errc::kProtocol, "bootstrap hello on a data port");
      // The proof goes before anything else the connecting side reads (reply, migration reply).
      if (s.ok()) s = sendProof(p.fd.get(), key_, h->nonce, p.serverNonce, Deadline::after(kHelloGrace));
      if (s.ok()) s = handleHello(std::move(p.fd), *h);
      if (!s.ok()) refuse(p, s.message());
      p.fd.reset();
    }
    std::erase_if(pending, [](const Pending& p) { return !p.fd; });
  }
}

Status Comm::handleHello(UniqueFd fd, const Hello& h) {
  int fl = fcntl(fd.get(), F_GETFL);
  fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  Deadline d = Deadline::after(kHelloGrace);
  Incoming in;
  HelloReply reply;
  if (broken_.load()) {
    // A failed communicator takes no new connections; the peer learns it at once.
    reply.status = ReplyStatus::kRefused;
    std::array<std::byte, kHelloReplyBytes> rb;
    encodeHelloReply(reply, rb);
    (void)transport::sendAll(fd.get(), rb, d);
    if (h.kind == HelloKind::kShmData) transport::unlinkShm(h.shmName);
    return Status(Errc::kAborted, "communicator failed; connection from rank " + std::to_string(h.srcRank) + " refused");
  }
  // A data hello with a migration epoch opens a replacement path for an existing connection.
  if (failover_ && failover::Failover::isMigrationHello(h)) return failover_->onMigrationHello(std::move(fd), h);
  if (h.kind == HelloKind::kShmData) {
    auto m = transport::openShm(h.shmName, opts_.slots, opts_.chunkBytes);
    if (!m.ok()) {
      reply.status = ReplyStatus::kShmFailed;
      std::array<std::byte, kHelloReplyBytes> rb;
      encodeHelloReply(reply, rb);
      (void)transport::sendAll(fd.get(), rb, d);
      return m.status();
    }
    in.shm = std::move(m).value();
  }
  PortKey key(h.srcRank, static_cast<int>(h.channel));
  {
    std::lock_guard lk(inMu_);
    if (incoming_.count(key)) return Status(Errc::kProtocol, "duplicate connection from rank " + std::to_string(h.srcRank));
  }
  std::array<std::byte, kHelloReplyBytes> rb;
  encodeHelloReply(reply, rb);
  RECCL_TRY(transport::sendAll(fd.get(), rb, d));
  in.fd = std::move(fd);
  in.hello = h;
  {
    std::lock_guard lk(inMu_);
    incoming_[key] = std::move(in);
  }
  inCv_.notify_all();
  return Status::Ok();
}

}  // namespace reccl::core
