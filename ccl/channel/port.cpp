#include "channel/port.h"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "reccl/common/log.h"

namespace reccl::channel {
namespace {

constexpr int kSpinIterations = 256;
constexpr auto kMaxSleep = std::chrono::milliseconds(20);
// A yield that returns later than this ran someone else's time slice, not a quick peer thread.
constexpr auto kBusyYield = std::chrono::microseconds(50);

}  // namespace

bool ErrorLatch::latch(const Status& s) {
  std::lock_guard lk(mu_);
  if (set_.load(std::memory_order_relaxed)) return false;
  status_ = s;
  set_.store(true, std::memory_order_release);
  return true;
}

Status ErrorLatch::get() const {
  std::lock_guard lk(mu_);
  return status_;
}

void PortBase::setPath(std::unique_ptr<Path> p) {
  std::lock_guard lk(pathMu_);
  if (path_) {
    path_->shutdown();
    retired_.push_back(std::move(path_));
  }
  path_ = std::move(p);
  pathRaw_.store(path_.get(), std::memory_order_release);
}

void PortBase::releasePaths() noexcept {
  std::unique_ptr<Path> current;
  std::vector<std::unique_ptr<Path>> retired;
  {
    std::lock_guard lk(pathMu_);
    pathRaw_.store(nullptr, std::memory_order_release);
    current = std::move(path_);
    retired.swap(retired_);
  }
  // Outside the lock: a path's destructor waits for its progress thread, which may be in this
  // port. Retired paths first, as the members' order did.
  retired.clear();
  current.reset();
}

void PathFailureHook::install(Fn fn) {
  std::unique_lock lk(mu_);
  fn_ = std::move(fn);
}

void PathFailureHook::remove() noexcept {
  // Waits for the calls inside the hook (they hold mu_ shared): none runs after this returns.
  std::unique_lock lk(mu_);
  fn_ = nullptr;
}

bool PathFailureHook::offer(const PortId& id, const Path* self, bool isSender, const Status& s) const {
  std::shared_lock lk(mu_);
  return fn_ && fn_(id, self, isSender, s);
}

void PortBase::pathFailed(const Path* self, bool isSender, const Status& s) {
  if (env_ && env_->pathFailureHook.offer(id_, self, isSender, s)) return;
  if (self && path() != self) {
    RECCL_INFO(kLogNet, "%s: the path was replaced while its failure was judged; ignored", s.message().c_str());
    return;
  }
  // Nothing took it up (no failover, a dead peer, shared memory): the connection is lost, unless
  // what failed it was the peer's bytes (a frame or an ack no step explains), not the peer's going.
  if (s.code() == Errc::kProtocol) fail(s);
  else lose(s);
}

bool PortBase::replacedPath(const Path* self, const Status& s, LogSubsys subsys) const {
  if (path() == self) return false;
  RECCL_INFO(subsys, "%s (path already replaced)", s.message().c_str());
  return true;
}

bool PortBase::fail(const Status& s) {
  const bool first = latch_.latch(s);
  if (env_) env_->firstPortFailure.latch(s);
  wakeAll();
  return first;
}

void PortBase::lose(const Status& s) {
  if (fail(s) && env_ && !env_->aborted.load() && !env_->broken.load()) env_->recordLoss(id_.peer);
}

void PortEnv::recordLoss(int peer) {
  int none = -1;
  firstLostPeer.compare_exchange_strong(none, peer);  // before the count: a reader that sees it sees the peer
  {
    std::lock_guard lk(lostMu);
    lostPeers.insert(peer);
  }
  lostConnections.fetch_add(1);
}

bool PortEnv::peerLost(int peer) const {
  std::lock_guard lk(lostMu);
  return lostPeers.count(peer) > 0;
}

namespace {
uint64_t monoNs() noexcept {
  auto now = std::chrono::steady_clock::now().time_since_epoch();  // CLOCK_MONOTONIC
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
}

// A running maximum: stamps from several connections land in any order.
void raiseTo(std::atomic<uint64_t>& a, uint64_t v) noexcept {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (cur < v && !a.compare_exchange_weak(cur, v, std::memory_order_release, std::memory_order_relaxed)) {
  }
}
}  // namespace

void PortBase::armFirstStepStamp(bool awayFromFault) noexcept {
  const uint64_t now = monoNs();
  armedNs_.store(now, std::memory_order_relaxed);
  bool outstanding = false;
  if (dynamic_cast<SendPort*>(this)) {
    // posted/consumed are the sender's own counters: steps handed over vs acknowledged.
    const ConnCounters* c = counters();
    outstanding = c->posted.load(std::memory_order_acquire) > c->consumed.load(std::memory_order_acquire);
    if (!outstanding && env_) {
      raiseTo(env_->lastMigrationResumeNs, now);
      if (awayFromFault) raiseTo(env_->lastFaultMoveResumeNs, now);
    }
  }
  arm_.store(static_cast<uint8_t>(kArmed | (outstanding ? kWaiting : 0) | (awayFromFault ? kFaultMove : 0)),
             std::memory_order_release);
}

void PortBase::stampFirstStep(uint64_t step) noexcept {
  if (!(arm_.load(std::memory_order_relaxed) & kArmed)) return;
  const uint8_t arm = arm_.exchange(0, std::memory_order_acq_rel);
  if (!(arm & kArmed) || !env_) return;
  uint64_t now = monoNs();
  env_->lastMigrationFirstStepNs.store(now, std::memory_order_release);
  const bool waited = arm & kWaiting;
  if (waited) raiseTo(env_->lastMigrationResumeNs, now);
  if (arm & kFaultMove) {
    env_->lastFaultMoveFirstStepNs.store(now, std::memory_order_release);
    if (waited) raiseTo(env_->lastFaultMoveResumeNs, now);
  }
  uint64_t armed = armedNs_.load(std::memory_order_relaxed);
  bool sender = dynamic_cast<SendPort*>(this) != nullptr;
  RECCL_INFO(kLogFailover, "rank %d: first step on the new path of rank %d->%d ch %d: %s step %llu, %lld us after the path started%s",
             id_.self, sender ? id_.self : id_.peer, sender ? id_.peer : id_.self, id_.channel,
             sender ? "ack of" : "received", static_cast<unsigned long long>(step),
             armed && now >= armed ? static_cast<long long>((now - armed) / 1000) : -1ll,
             !sender ? "" : waited ? " (steps were waiting)" : " (nothing was waiting at the start)");
}

void PortBase::wakeAll() noexcept {
  counters()->toReceiver.ring();
  counters()->toSender.ring();
}

std::optional<Status> PortBase::stopReason() const {
  if (latch_.set()) return latch_.get();
  if (!env_) return std::nullopt;
  if (env_->commFailure.set()) return env_->commFailure.get();
  if (env_->aborted.load(std::memory_order_acquire))
    return Status(Errc::kAborted, env_->revoked.load(std::memory_order_relaxed) ? "communicator revoked (recclCommRevoke)"
                                                                                 : "communicator aborted");
  return std::nullopt;
}

template <typename Ready>
Status PortBase::waitUntil(Doorbell& bell, Ready ready, Deadline deadline, const char* what) {
  Clock::time_point slowStart{}, spinUntil{};
  const auto window = std::chrono::nanoseconds(env_ ? env_->waitSpinNs : 0);
  for (int spin = 0;; ++spin) {
    uint32_t seen = bell.sample();
    if (ready()) {
      // Waits that end within a few spin windows (small steps, a latency-bound loop) keep the
      // spin; long ones (large steps, a slow peer) go straight to sleep next time.
      if (spin > kSpinIterations) spinHot_ = Clock::now() - slowStart <= 2 * window;
      return Status::Ok();
    }
    if (auto why = stopReason()) return std::move(*why);
    if (spin < kSpinIterations) {
      _mm_pause();
      continue;
    }
    // Sleeping and being woken costs more than a short answer takes to come (on a VM, far more).
    // The yield lets the progress thread and the other ranks' threads run on a machine with few
    // CPUs; a yield that comes back late means the CPU has other work (someone's build), and the
    // thread then sleeps instead of taking turns with it.
    if (spin == kSpinIterations) {
      slowStart = Clock::now();
      spinUntil = spinHot_ ? slowStart + window : slowStart;
    }
    if (window.count() > 0) {
      auto now = Clock::now();
      if (now < spinUntil) {
        sched_yield();
        if (Clock::now() - now > kBusyYield) spinUntil = now;
        continue;
      }
    }
    if (deadline.expired()) {
      // The path in force and its epoch: which connection the wait was on when a fault went
      // unnoticed (the port keeps every path it had until it goes, so the pointer stays valid).
      const Path* p = path();
      return Status(Errc::kTimeout, std::string("no progress ") + what + " rank " + std::to_string(id_.peer) +
                                        " on channel " + std::to_string(id_.channel) +
                                        " before the deadline (path " + (p ? p->describe() : "none") + ", epoch " +
                                        std::to_string(epoch()) + ")");
    }
    auto left = deadline.at() - Clock::now();
    bell.sleep(seen, std::min<std::chrono::nanoseconds>(left, kMaxSleep));
  }
}

SendPort::SendPort(PortId id, ConnMemory mem, PortEnv* env)
    : PortBase(id, std::move(mem), env), external_(new std::atomic<const std::byte*>[slots()]) {
  for (uint32_t i = 0; i < slots(); ++i) external_[i].store(nullptr, std::memory_order_relaxed);
}

Result<std::span<std::byte>> SendPort::acquire(Deadline deadline) {
  ConnCounters* c = counters();
  uint64_t next = c->posted.load(std::memory_order_relaxed) + 1;
  uint32_t s = slots();
  RECCL_TRY(waitUntil(
      c->toSender, [&] { return next <= c->consumed.load(std::memory_order_acquire) + s; }, deadline,
      "sending to"));
  return std::span<std::byte>(mem_.slotPayload(next), chunkBytes());
}

Status SendPort::post(size_t bytes, const CollDesc& desc) { return commit(bytes, desc, nullptr); }

Status SendPort::postDirect(const void* payload, size_t bytes, const CollDesc& desc) {
  RECCL_TRY(commit(bytes, desc, static_cast<const std::byte*>(payload)));
  lastDirect_ = posted();
  return Status::Ok();
}

bool SendPort::sendsDirect() const noexcept {
  Path* p = path();
  return p && p->sendsParts();
}

Status SendPort::waitAcked(uint64_t step, Deadline deadline) {
  ConnCounters* c = counters();
  return waitUntil(
      c->toSender, [&] { return c->consumed.load(std::memory_order_acquire) >= step; }, deadline,
      "waiting for the acknowledgement of");
}

Status SendPort::commit(size_t bytes, const CollDesc& desc, const std::byte* direct) {
  if (latch_.set()) return latch_.get();
  if (bytes > chunkBytes()) return Status(Errc::kInternal, "post: more bytes than a slot holds");
  ConnCounters* c = counters();
  uint64_t step = c->posted.load(std::memory_order_relaxed) + 1;
  StepHeader h;
  h.step = step;
  h.epoch = epoch();
  h.bytes = static_cast<uint32_t>(bytes);
  h.flags = direct ? kStepFlagAckNow : 0;  // finishDirect() waits for its ack
  h.desc = desc;
  encodeStepHeader(h, std::span<std::byte, kStepHeaderBytes>(mem_.slotFrame(step), kStepHeaderBytes));
  // Before `posted`: a transport that sees the step sees where its payload is.
  external_[(step - 1) % slots()].store(bytes ? direct : nullptr, std::memory_order_relaxed);
  c->posted.store(step, std::memory_order_release);
  c->toReceiver.ring();
  if (Path* p = path()) p->notifyPosted();
  return Status::Ok();
}

std::span<const std::byte> SendPort::frame(uint64_t step) const noexcept {
  std::byte* f = mem_.slotFrame(step);
  uint32_t bytes;
  std::memcpy(&bytes, f + 12, sizeof(bytes));
  size_t n = std::min<size_t>(bytes, chunkBytes());
  // Whoever takes the pointer copies; a socket path sending the parts meanwhile reads the
  // caller's memory, which holds the same bytes (see postDirect).
  if (const std::byte* e = external_[(step - 1) % slots()].exchange(nullptr, std::memory_order_acquire))
    std::memcpy(f + kStepHeaderBytes, e, n);
  return {f, kStepHeaderBytes + n};
}

SendPort::FrameParts SendPort::frameParts(uint64_t step) const noexcept {
  const std::byte* f = mem_.slotFrame(step);
  uint32_t bytes;
  std::memcpy(&bytes, f + 12, sizeof(bytes));
  size_t n = std::min<size_t>(bytes, chunkBytes());
  const std::byte* e = external_[(step - 1) % slots()].load(std::memory_order_acquire);
  return {{f, kStepHeaderBytes}, {e ? e : f + kStepHeaderBytes, n}};
}

void SendPort::onAck(uint64_t applied) noexcept {
  ConnCounters* c = counters();
  // Only ever forward: a retired path's thread and the new path (or a migration's commit) may
  // report acks at the same time.
  uint64_t cur = c->consumed.load(std::memory_order_relaxed);
  while (applied > cur)
    if (c->consumed.compare_exchange_weak(cur, applied, std::memory_order_release, std::memory_order_relaxed)) {
      c->toSender.ring();
      stampFirstStep(applied);
      return;
    }
}

Result<std::span<const std::byte>> RecvPort::wait(Deadline deadline, const CollDesc& expect) {
  if (holding_) return Status(Errc::kInternal, "wait: previous step not released");
  ConnCounters* c = counters();
  uint64_t next = c->consumed.load(std::memory_order_relaxed) + 1;
  RECCL_TRY(waitUntil(
      c->toReceiver, [&] { return c->posted.load(std::memory_order_acquire) >= next; }, deadline,
      "receiving from"));
  const std::byte* f = mem_.slotFrame(next);
  auto h = decodeStepHeader(std::span<const std::byte>(f, kStepHeaderBytes));
  if (!h.ok()) {
    fail(h.status());
    return h.status();
  }
  if (h->step != next || h->bytes > chunkBytes()) {
    Status s(Errc::kProtocol, "step " + std::to_string(h->step) + " in the slot of step " + std::to_string(next) +
                                  " from rank " + std::to_string(id_.peer));
    fail(s);
    return s;
  }
  Status d = checkDesc(expect, h->desc, id_.peer);
  if (!d.ok()) {
    fail(d);
    return d;
  }
  holding_ = true;
  return std::span<const std::byte>(f + kStepHeaderBytes, h->bytes);
}

Status RecvPort::release() {
  if (!holding_) return Status(Errc::kInternal, "release without wait");
  holding_ = false;
  ConnCounters* c = counters();
  c->consumed.store(c->consumed.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  c->toSender.ring();
  if (Path* p = path()) p->notifyConsumed();
  return Status::Ok();
}

void RecvPort::expectDirect(uint64_t step, void* dst, size_t bytes) noexcept {
  DirectTarget& t = direct_[0].step.load(std::memory_order_relaxed) <= direct_[1].step.load(std::memory_order_relaxed)
                        ? direct_[0]
                        : direct_[1];
  t.step.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  t.dst.store(static_cast<std::byte*>(dst), std::memory_order_relaxed);
  t.bytes.store(bytes, std::memory_order_relaxed);
  t.step.store(step, std::memory_order_release);
}

std::byte* RecvPort::directTarget(uint64_t step, size_t bytes) const noexcept {
  if (step == 0) return nullptr;
  for (const DirectTarget& t : direct_) {
    if (t.step.load(std::memory_order_acquire) != step) continue;
    std::byte* dst = t.dst.load(std::memory_order_relaxed);
    size_t want = t.bytes.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (t.step.load(std::memory_order_relaxed) != step || want != bytes) return nullptr;
    return dst;
  }
  return nullptr;
}

void RecvPort::onLandedDirect(uint64_t step) noexcept {
  for (DirectTarget& t : direct_)
    if (t.step.load(std::memory_order_relaxed) == step) t.landed.store(step, std::memory_order_relaxed);
}

bool RecvPort::landedDirect(const void* dst) const noexcept {
  if (!holding_) return false;
  uint64_t step = applied() + 1;
  for (const DirectTarget& t : direct_)
    if (t.step.load(std::memory_order_relaxed) == step && t.landed.load(std::memory_order_relaxed) == step &&
        t.dst.load(std::memory_order_relaxed) == dst)
      return true;
  return false;
}

void RecvPort::onReceived(uint64_t step) noexcept {
  ConnCounters* c = counters();
  c->posted.store(step, std::memory_order_release);
  c->toReceiver.ring();
  stampFirstStep(step);
}

}  // namespace reccl::channel
