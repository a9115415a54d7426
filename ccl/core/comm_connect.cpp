// The communicator's connections: a connection end made on first use (sendPort: connect and
// hello; recvPort: the peer's connection, handed over by the data listener), and the data
// listener itself, which proves every hello and hands migration hellos to the failover part.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cinttypes>
#include <cstring>

#include "core/comm.h"
#include "core/handshake.h"
#include "reccl/common/log.h"
#include "transport/shm_ring.h"
#include "transport/socket_paths.h"

namespace reccl::core {
namespace {

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

Result<UniqueFd> Comm::dialData(int peer, int preferred, Deadline d, int* rail) {
  core::FailoverPart::NewConnectionRails plan;
  if (failover_) plan = failover_->railsForNewConnection(peer, preferred);  // avoids rails known down
  if (plan.rails.empty()) plan.rails.push_back(preferred);
  const RankInfo& pi = table_[peer];
  std::erase_if(plan.rails, [&](int r) { return r < 0 || static_cast<size_t>(r) >= myNics_.size() ||
                                                static_cast<size_t>(r) >= pi.nics.size(); });
  if (plan.rails.empty()) return Status(Errc::kInternal, "no nic on the rails to rank " + std::to_string(peer));
  // Without failover: the one rail until the deadline. With it: each rail for perRailMs in turn,
  // round and round (one rail: again and again), until one answers, the deadline passes, or the
  // communicator or any of its ports fails (a peer's death, a connection with no path left), so
  // a call blocked here returns with it.
  const bool turns = plan.perRailMs > 0;
  for (size_t i = 0;; i = (i + 1) % plan.rails.size()) {
    *rail = plan.rails[i];
    const NicInfo& src = myNics_[*rail];
    transport::Endpoint dst{pi.nics[*rail].addr, pi.dataPort};
    auto fd = transport::connectTcp(dst, src.addr, src.name == "lo" ? "" : src.name,
                                    turns ? d.within(plan.perRailMs) : d);
    if (fd.ok()) return fd;
    // After init the deadline ends with the communicator: its failure is the answer.
    if (broken_.load() || (d.cancelled() && initialized_)) return asyncError();
    if (d.cancelled()) return Status(Errc::kAborted, "init aborted while connecting to rank " + std::to_string(peer));
    if (!turns || d.expired()) return fd.status();
    if (env_.firstPortFailure.set()) return env_.firstPortFailure.get();  // the call fails with it
    RECCL_INFO(kLogNet, "rank %d: connect to rank %d on rail %d (%s): %s; dialling rail %d next", rank_, peer, *rail,
               src.name.c_str(), fd.status().message().c_str(), plan.rails[(i + 1) % plan.rails.size()]);
  }
}

Status Comm::connectFailure(const Status& s, int peer) const {
  // Its deadline ends with the communicator, and breakComm shuts a dialling socket down: the
  // communicator's failure is then the reason.
  if (broken_.load()) return asyncError();
  return s.Wrap("connecting to rank " + std::to_string(peer));
}

Result<channel::SendPort*> Comm::sendPort(int peer, int channel) {
  std::lock_guard lk(sendMu_);
  CloseIfBroken<decltype(sends_)> closeOnExit{this, sendsLeftOpen_, sends_};
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
  int rail = -1;
  if (shm) {
    shmName = "/reccl-" + std::to_string(getpid()) + "-" + hex32(commId_) + "-" + std::to_string(rank_) + "-" +
              std::to_string(peer) + "-" + std::to_string(channel) + "-" + std::to_string(shmSerial_.fetch_add(1));
    // Connect first: the named segment exists only while the peer is known to be there.
    transport::Endpoint dst{pi.nics[0].addr, pi.dataPort};
    auto c = transport::connectTcp(dst, 0, "", d);
    if (!c.ok()) return connectFailure(c.status(), peer);
    fd = std::move(c).value();
    RECCL_ASSIGN_OR_RETURN(mem, transport::createShm(shmName, opts_.slots, opts_.chunkBytes));
    h.kind = HelloKind::kShmData;
    h.shmName = shmName;
    desc = "shm rank " + std::to_string(rank_) + "->" + std::to_string(peer) + " ch " + std::to_string(channel);
  } else {
    RECCL_ASSIGN_OR_RETURN(fd, dialData(peer, railFor(topo_, rank_, channel), d, &rail));
    const NicInfo& src = myNics_[rail];
    transport::Endpoint dst{pi.nics[rail].addr, pi.dataPort};
    transport::tuneDataSocket(fd.get(), src.name);
    RECCL_ASSIGN_OR_RETURN(mem, channel::ConnMemory::anonymous(opts_.slots, opts_.chunkBytes));
    h.kind = HelloKind::kTcpData;
    desc = "tcp " + src.name + " rank " + std::to_string(rank_) + "->" + std::to_string(peer) + " ch " +
           std::to_string(channel) + " (" + dst.str() + ")";
  }
  // Until this returns, a failing communicator shuts the socket down (breakComm); one that failed
  // before it was listed is caught by the check after.
  struct Dialing {
    Comm* c;
    int fd;
    Dialing(Comm* comm, int socket) : c(comm), fd(socket) {
      std::lock_guard lk(c->dialMu_);
      c->dialing_.push_back(fd);
    }
    // Before the socket may close elsewhere: its number could then be another socket's.
    void end() {
      if (fd < 0) return;
      std::lock_guard lk(c->dialMu_);
      std::erase(c->dialing_, fd);
      fd = -1;
    }
    ~Dialing() { end(); }
  } dialing(this, fd.get());
  HelloReply reply;
  Status s = broken_.load() ? asyncError() : sendHelloAndWait(fd.get(), h, key_, d, &reply);
  if (shm) transport::unlinkShm(shmName);  // the peer unlinked it already; this covers failures
  if (!s.ok()) return connectFailure(s, peer);
  auto port = std::make_unique<channel::SendPort>(channel::PortId{rank_, peer, channel}, std::move(mem), &env_);
  if (shm) {
    port->setPath(std::make_unique<transport::ShmPath>(engine_.get(), std::move(fd), port.get(), true, desc));
  } else if (verbs_) {
    // The connection that carried the hello is the side channel of the records (this end first;
    // the receiver's listener answers with its QP connected), then closes.
    desc = "verbs " + myNics_[rail].name + " rank " + std::to_string(rank_) + "->" + std::to_string(peer) + " ch " +
           std::to_string(channel);
    dialing.end();  // the link owns the socket now, and closes it when this returns
    auto link = verbs_->accept(std::move(fd));
    const transport::LinkEnd end{port.get(), true, rail, port->epoch()};
    transport::ByteIo io = link->io(d);
    Status rec = link->sendRecord(io, end);
    if (rec.ok()) rec = link->takePeerRecord(io, end);
    if (!rec.ok()) return connectFailure(rec, peer);
    auto path = link->makePath(*port, true, 0, desc);
    auto* raw = path.get();
    port->setPath(std::move(path));
    raw->start();
  } else {
    auto path = std::make_unique<transport::SocketSendPath>(engine_.get(), std::move(fd), port.get(), desc);
    auto* raw = path.get();
    port->setPath(std::move(path));
    raw->start();
  }
  RECCL_INFO(kLogNet, "connected %s", desc.c_str());
  auto* out = port.get();
  sends_.emplace(key, std::move(port));
  portsMade_.fetch_add(1, std::memory_order_relaxed);
  if (!shm) sendRail_[key] = rail;
  return out;
}

Result<channel::RecvPort*> Comm::recvPort(int peer, int channel) {
  std::lock_guard lk(recvMu_);
  CloseIfBroken<decltype(recvs_)> closeOnExit{this, recvsLeftOpen_, recvs_};
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
    if (!ok && d.cancelled()) return Status(Errc::kAborted, "init aborted while waiting for rank " + std::to_string(peer));
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
  } else if (in.port) {
    port = std::move(in.port);  // verbs: connected by the listener
    if (channel::Path* p = port->path()) recvRail_[key] = paths().railOf(*p);
  } else {
    RECCL_ASSIGN_OR_RETURN(auto mem, channel::ConnMemory::anonymous(opts_.slots, opts_.chunkBytes));
    transport::tuneDataSocket(in.fd.get(), "");
    port = std::make_unique<channel::RecvPort>(channel::PortId{rank_, peer, channel}, std::move(mem), &env_);
    auto path = std::make_unique<transport::SocketRecvPath>(engine_.get(), std::move(in.fd), port.get(), desc);
    auto* raw = path.get();
    port->setPath(std::move(path));
    raw->start();
    recvRail_[key] = paths_->railOf(*raw);
  }
  auto* out = port.get();
  recvs_.emplace(key, std::move(port));
  portsMade_.fetch_add(1, std::memory_order_relaxed);
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
      if (s.ok() && isBootstrapHello(h->kind)) s = Status(Errc::kProtocol, "bootstrap hello on a data port");
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
  // A data hello with a migration epoch opens a replacement path for an existing connection.
  // Failover answers it on a failed communicator too (peer-failed): the peer then fails at once
  // instead of retrying until its failover timeout.
  if (failover_ && isMigrationHello(h)) return failover_->onMigrationHello(std::move(fd), h);
  // A shrink's note is taken on a broken communicator too: that is what a shrink after a rank's
  // death runs on.
  if (h.kind == HelloKind::kShrink) return acceptShrinkNote(std::move(fd), h);
  if (broken_.load()) {
    // A failed communicator takes no new connections; the peer learns it at once.
    reply.status = ReplyStatus::kRefused;
    std::array<std::byte, kHelloReplyBytes> rb;
    encodeHelloReply(reply, rb);
    (void)transport::sendAll(fd.get(), rb, d);
    if (h.kind == HelloKind::kShmData) transport::unlinkShm(h.shmName);
    return Status(Errc::kAborted, "communicator failed; connection from rank " + std::to_string(h.srcRank) + " refused");
  }
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
  if (verbs_ && h.kind == HelloKind::kTcpData) RECCL_TRY(acceptVerbs(in, h, d));
  {
    std::lock_guard lk(inMu_);
    incoming_[key] = std::move(in);
  }
  inCv_.notify_all();
  return Status::Ok();
}

Status Comm::acceptVerbs(Incoming& in, const Hello& h, Deadline d) {
  // The receiving end is made here, not in recvPort: its sender waits for this end's record, and
  // every rank connects its sends before it takes its receives (init), so waiting for recvPort
  // would hold every rank in its first send.
  const int peer = h.srcRank, channel = static_cast<int>(h.channel);
  RECCL_ASSIGN_OR_RETURN(auto mem, channel::ConnMemory::anonymous(opts_.slots, opts_.chunkBytes));
  auto port = std::make_unique<channel::RecvPort>(channel::PortId{rank_, peer, channel}, std::move(mem), &env_);
  auto link = verbs_->accept(std::move(in.fd));
  const transport::LinkEnd end{port.get(), false, -1, port->epoch()};
  transport::ByteIo io = link->io(d);
  const std::string from = "verbs connection from rank " + std::to_string(peer);
  RECCL_TRY(link->takePeerRecord(io, end).Wrap(from));
  RECCL_TRY(link->sendRecord(io, end).Wrap(from));
  const std::string desc = "verbs rank " + std::to_string(peer) + "->" + std::to_string(rank_) + " ch " +
                           std::to_string(channel);
  auto path = link->makePath(*port, false, 0, desc);
  auto* raw = path.get();
  port->setPath(std::move(path));
  raw->start();
  in.port = std::move(port);
  return Status::Ok();
}

}  // namespace reccl::core
