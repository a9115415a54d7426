#include "transport/verbs/verbs_path_factory.h"

#include <pthread.h>

#include <array>

#include "reccl/common/log.h"
#include "transport/verbs/conn_info.h"
#include "transport/verbs/rail_map.h"

namespace reccl::transport::verbs {
namespace {

// How long a passive sender waits for the initiating receiver's "ready" byte: the receiver
// sends it right after it connected its QP, so this is a round trip and a QP state change.
constexpr int64_t kReadyMs = 5000;
// How long an initiating receiver waits for its old QP's receive queue to flush before it lets
// the sender resend (as the communicator's commit does at a passive receiver).
constexpr int64_t kQuiesceMs = 2000;
// How long the reaper waits for a retired QP's flushes (an rxe QP took up to 0.9 s to go).
constexpr int64_t kRetireMs = 5000;
// How long the factory's end waits for the kernel to destroy the QPs, registrations and devices
// (graveyard.h): a QP normally goes in milliseconds, one whose packets a stalled transmit queue
// holds waits tens of seconds on rxe; what is left then is destroyed in the background.
constexpr int64_t kDestroyWaitMs = 5000;
// How long after a failed start its failure is reported: the commit that started the path has
// returned by then (it only publishes the path and retires the old one after start()).
constexpr int64_t kStartFailureDelayMs = 500;

// The path of a link whose QP could not be made into one: it reports that when started, so the
// failover moves the connection again (a commit needs a path to publish).
class FailedPath final : public channel::Path {
 public:
  FailedPath(VerbsPathFactory* f, channel::PortBase* port, bool isSender, Status why, std::string desc)
      : f_(f), port_(port), isSender_(isSender), why_(std::move(why)), desc_(std::move(desc)) {}
  void notifyPosted() noexcept override {}
  void notifyConsumed() noexcept override {}
  void start() override { f_->failLater(port_, this, isSender_, why_); }
  std::string describe() const override { return desc_; }

 private:
  VerbsPathFactory* f_;
  channel::PortBase* port_;
  bool isSender_;
  Status why_;
  std::string desc_;
};

// A side channel (TCP link) and, once the records are exchanged, an RC QP connected to the
// peer's on the link's rail. A handshake calls sendRecord and takePeerRecord once each; which
// comes first says whether this end initiated it (see the file comment of the header).
class VerbsLink final : public Link {
 public:
  VerbsLink(VerbsPathFactory* f, std::unique_ptr<Link> side) : f_(f), side_(std::move(side)) {}

  ByteIo io(Deadline deadline) override { return side_->io(deadline); }

  Status sendRecord(const ByteIo& io, const LinkEnd& end) override {
    if (calls_++ % 2 == 0) initiator_ = true;
    if (sent_) return Status::Ok();
    RECCL_TRY(prepare(end, end.rail));
    std::array<std::byte, kConnInfoBytes> b;
    encodeConnInfo(mine_, b);
    RECCL_TRY(io.send(b).Wrap("sending the verbs connection record"));
    sent_ = true;
    return Status::Ok();
  }

  Status takePeerRecord(const ByteIo& io, const LinkEnd& end) override {
    if (calls_++ % 2 == 0) initiator_ = false;
    if (!took_) {
      std::array<std::byte, kConnInfoBytes> b;
      RECCL_TRY(io.recv(b).Wrap("reading the peer's verbs connection record"));
      RECCL_ASSIGN_OR_RETURN(theirs_, decodeConnInfo(b));
      // The passive end of a communicator's first connection learns the rail from the record.
      RECCL_TRY(prepare(end, end.rail >= 0 ? end.rail : theirs_.rail));
      RECCL_TRY(checkPeerInfo(mine_, theirs_));
      RECCL_TRY(qp_->connect(theirs_, f_->config().settings));
      took_ = true;
    }
    if (end.standbyOpening) return Status::Ok();
    if (initiator_ && !end.isSender) {
      // Rule 2: the passive sender resends once it reads this byte; the old QP must let nothing
      // more land by then (in ERR, its receive queue flushed: Path::stopLanding), so that no late
      // packet or retransmission of it lands in a slot that holds a newer step.
      if (channel::Path* old = end.port->path()) {
        const uint64_t t0 = monotonicNs();
        RECCL_TRY(old->stopLanding(Deadline::afterMs(kQuiesceMs)).Wrap("retiring the old receive path"));
        RECCL_INFO(kLogNet, "%s: old path quiesced in %llu us", old->describe().c_str(),
                   static_cast<unsigned long long>((monotonicNs() - t0) / 1000));
      }
      const std::byte ready{1};
      RECCL_TRY(io.send(std::span<const std::byte>(&ready, 1)).Wrap("sending the verbs ready byte"));
    }
    needReady_ = !initiator_ && end.isSender;
    return Status::Ok();
  }

  void keepIdle() noexcept override { side_->keepIdle(); }
  bool alive() const noexcept override { return side_->alive() && !(qp_ && qp_->inError()); }
  int waitFd() const noexcept override { return side_->waitFd(); }
  bool hasInput() const noexcept override { return side_->hasInput(); }
  void closeNow() noexcept override {
    side_->closeNow();
    qp_.reset();
  }

  std::unique_ptr<channel::Path> makePath(channel::PortBase& port, bool isSender, uint64_t after,
                                          std::string desc) override {
    if (!qp_ || !took_ || !reg_)
      return std::make_unique<FailedPath>(f_, &port, isSender,
                                          Status(Errc::kInternal, desc + ": no connected queue pair on the link"), desc);
    const VerbsPathOptions opts = f_->config().pathOptions;
    std::unique_ptr<VerbsPath> path;
    Status bad;
    if (isSender) {
      auto r = VerbsSendPath::create(static_cast<channel::SendPort*>(&port), std::move(qp_), reg_, theirs_, desc,
                                     opts, after);
      if (r.ok()) path = std::move(r).value(); else bad = r.status();
    } else {
      auto r = VerbsRecvPath::create(static_cast<channel::RecvPort*>(&port), std::move(qp_), reg_, theirs_, desc,
                                     opts, after);
      if (r.ok()) path = std::move(r).value(); else bad = r.status();
    }
    if (!path) return std::make_unique<FailedPath>(f_, &port, isSender, bad, desc);
    path->attach(f_->engine(), f_->graveyard(), [f = f_](VerbsPath* p) { f->reap(p); },
                 [f = f_](VerbsPath* p, Status why) { f->failLater(p->port(), p, p->isSender(), std::move(why)); });
    if (needReady_) {
      std::byte ready{0};
      Status s = side_->io(Deadline::afterMs(kReadyMs)).recv(std::span<std::byte>(&ready, 1));
      if (!s.ok()) path->failOnStart(Status(Errc::kLinkFailure, "the receiver never said it was ready: " + s.message()));
    }
    return path;
  }

 private:
  // This end's QP and record on `rail` (once per link).
  Status prepare(const LinkEnd& end, int rail) {
    if (qp_) return Status::Ok();
    RailDevice* dev = f_->rail(rail);
    if (!dev || !end.port) return Status(Errc::kInvalidArgument, "verbs link: no rail " + std::to_string(rail));
    RECCL_ASSIGN_OR_RETURN(reg_, f_->registration(*end.port, end.isSender));
    RECCL_ASSIGN_OR_RETURN(qp_, RcQp::create(*dev, depthForSlots(end.port->slots())));
    RECCL_ASSIGN_OR_RETURN(mine_, reg_->describe(rail, end.epoch));
    qp_->fillLocal(mine_);
    return Status::Ok();
  }

  VerbsPathFactory* f_;
  std::unique_ptr<Link> side_;
  std::unique_ptr<RcQp> qp_;
  const ConnRegistration* reg_ = nullptr;
  ConnInfo mine_, theirs_;
  unsigned calls_ = 0;
  bool initiator_ = false;
  bool sent_ = false, took_ = false;
  bool needReady_ = false;
};

}  // namespace

Result<std::unique_ptr<VerbsPathFactory>> VerbsPathFactory::create(VerbsPathFactoryConfig cfg) {
  if (!cfg.sideChannel) return Status(Errc::kInvalidArgument, "verbs path factory: no side channel factory");
  std::unique_ptr<VerbsPathFactory> f(new VerbsPathFactory(std::move(cfg)));
  f->graveyard_ = Graveyard::start("reccl-vgrave");  // first: whatever opens below ends there
  RECCL_ASSIGN_OR_RETURN(RdmaInventory inv, readRdmaInventory());
  for (size_t r = 0; r < f->cfg_.railNics.size(); ++r) {
    RECCL_ASSIGN_OR_RETURN(RailNic nic, railNicByName(f->cfg_.railNics[r]));
    RECCL_ASSIGN_OR_RETURN(auto dev, RailDevice::open(static_cast<int>(r), nic, inv, f->cfg_.gidIndex));
    f->rails_.push_back(std::move(dev));
  }
  RECCL_ASSIGN_OR_RETURN(f->engine_, VerbsProgress::start("reccl-verbs"));
  f->reaper_ = std::thread([p = f.get()] { p->reaperLoop(); });
  return f;
}

VerbsPathFactory::~VerbsPathFactory() {
  stop();
  // The ports went before, their paths' QPs into the graveyard: the registrations and then the
  // devices follow them there, in that order.
  auto closeWarning = [](auto& o) {
    if (Status s = o.close(); !s.ok()) RECCL_WARN(kLogNet, "verbs: %s", s.message().c_str());
  };
  for (auto& [port, reg] : regs_) graveyard_->bury(std::move(reg), closeWarning);
  regs_.clear();
  for (auto& r : rails_) graveyard_->bury(std::move(r), closeWarning);
  rails_.clear();
  if (size_t left = graveyard_->close(Deadline::afterMs(kDestroyWaitMs)); left > 0)
    RECCL_WARN(kLogNet,
               "verbs: %zu QP(s), registration(s) or device(s) not yet destroyed by the kernel %lld ms after the "
               "transport closed (an rxe QP's destroy waits for its packets on a transmit queue that does not move); "
               "they are destroyed in the background",
               left, static_cast<long long>(kDestroyWaitMs));
}

void VerbsPathFactory::stop() noexcept {
  engine_.reset();
  {
    std::lock_guard lk(reapMu_);
    stopping_ = true;
  }
  reapCv_.notify_all();
  if (reaper_.joinable()) reaper_.join();
}

Result<std::unique_ptr<Link>> VerbsPathFactory::connect(int peer, int rail, Deadline deadline) {
  if (!this->rail(rail)) return Status(Errc::kInternal, "verbs: no rail " + std::to_string(rail));
  RECCL_ASSIGN_OR_RETURN(auto side, cfg_.sideChannel->connect(peer, rail, deadline));
  return std::unique_ptr<Link>(new VerbsLink(this, std::move(side)));
}

std::unique_ptr<Link> VerbsPathFactory::accept(UniqueFd fd) { return adopt(acceptStream(std::move(fd))); }

// The side channel's link: kept as it is, it makes the side channel's byte-stream path (the peer's
// end of a relayed connection forwards bytes).
std::unique_ptr<Link> VerbsPathFactory::acceptStream(UniqueFd fd) { return cfg_.sideChannel->accept(std::move(fd)); }

std::unique_ptr<Link> VerbsPathFactory::adopt(std::unique_ptr<Link> stream) {
  return std::make_unique<VerbsLink>(this, std::move(stream));
}

// A path that is not a QP is the side channel's (a byte-stream path: acceptStream()).
int VerbsPathFactory::railOf(const channel::Path& path) const {
  auto* v = dynamic_cast<const VerbsPath*>(&path);
  return v ? v->rail() : cfg_.sideChannel->railOf(path);
}

void VerbsPathFactory::watch(const channel::Path& path, int64_t stallMs) const {
  // The path is the factory's own (made by makePath); watching arms its liveness probes.
  if (auto* v = dynamic_cast<const VerbsPath*>(&path))
    const_cast<VerbsPath*>(v)->watch(stallMs);
  else
    cfg_.sideChannel->watch(path, stallMs);
}

PathSample VerbsPathFactory::sample(const channel::Path& path, int64_t stallMs) const {
  // A dead link shows as a completion error (the path reports it), from the detector and the
  // device's async events, or, for a QP with nothing posted, as a liveness probe unanswered for
  // the stall time (verbs_paths.h). Sampling posts the probe when one is due.
  PathSample out;
  auto* v = dynamic_cast<const VerbsPath*>(&path);
  if (!v) return cfg_.sideChannel->sample(path, stallMs);
  out.known = true;
  out.pathId = reinterpret_cast<uintptr_t>(&path);
  out.bytes = v->bytesMoved();
  out.stalled = const_cast<VerbsPath*>(v)->stalled(monotonicNs(), stallMs, &out.quietMs);
  return out;
}

LossSample VerbsPathFactory::loss(const channel::Path& path) const {
  // A QP's losses show only in its port's counters, which the detector reads (rdma_loss.h).
  if (dynamic_cast<const VerbsPath*>(&path)) return {};
  return cfg_.sideChannel->loss(path);
}

Result<const ConnRegistration*> VerbsPathFactory::registration(channel::PortBase& port, bool isSender) {
  std::lock_guard lk(regMu_);
  if (auto it = regs_.find(&port); it != regs_.end()) return static_cast<const ConnRegistration*>(it->second.get());
  std::vector<RailDevice*> devs;
  for (auto& r : rails_) devs.push_back(r.get());
  RECCL_ASSIGN_OR_RETURN(auto reg,
                         ConnRegistration::create(devs, port.memory(), isSender ? ConnRole::kSender : ConnRole::kReceiver));
  const ConnRegistration* raw = reg.get();
  regs_.emplace(&port, std::move(reg));
  return raw;
}

std::vector<RailDevice*> VerbsPathFactory::railDevices() const {
  std::vector<RailDevice*> out;
  for (auto& r : rails_) out.push_back(r.get());
  return out;
}

void VerbsPathFactory::reap(VerbsPath* path) {
  {
    std::lock_guard lk(reapMu_);
    reapQ_.push_back(path);
  }
  reapCv_.notify_one();
}

void VerbsPathFactory::failLater(channel::PortBase* port, channel::Path* path, bool isSender, Status why) {
  {
    std::lock_guard lk(reapMu_);
    failQ_.push_back({port, path, isSender, std::move(why), Deadline::afterMs(kStartFailureDelayMs)});
  }
  reapCv_.notify_one();
}

void VerbsPathFactory::reaperLoop() {
  pthread_setname_np(pthread_self(), "reccl-vreaper");
  std::unique_lock lk(reapMu_);
  for (;;) {
    if (!failQ_.empty() && (failQ_.front().due.expired() || stopping_)) {
      LateFailure f = std::move(failQ_.front());
      failQ_.pop_front();
      lk.unlock();
      // A path replaced meanwhile (failover moved the connection on) is no news.
      if (!stopping_ && !f.port->replacedPath(f.path, f.why, kLogNet)) f.port->pathFailed(f.path, f.isSender, f.why);
      lk.lock();
      continue;
    }
    if (!reapQ_.empty()) {
      VerbsPath* p = reapQ_.front();
      reapQ_.pop_front();
      lk.unlock();
      if (Status s = p->retire(Deadline::afterMs(kRetireMs)); !s.ok())
        RECCL_WARN(kLogNet, "verbs: retiring %s: %s", p->describe().c_str(), s.message().c_str());
      lk.lock();
      continue;
    }
    if (stopping_ && failQ_.empty()) return;
    if (failQ_.empty())
      reapCv_.wait(lk);
    else
      reapCv_.wait_until(lk, failQ_.front().due.at());
  }
}

}  // namespace reccl::transport::verbs
