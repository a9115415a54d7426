// The two ends of a directed connection, as the algorithms see them. A channel is a set of such
// connections (see channel_set.h). Algorithms only ever call acquire/post and wait/release; the
// Path underneath (TCP socket bound to a NIC, shared-memory ring) is invisible to them.
//
// Step accounting (1-based steps, per directed connection):
//   sender:   posted  = steps written into slots and handed to the path
//             acked   = steps the receiver has applied (from acks); slot of step s is reused for
//                       step s + S only once acked >= s, so unacked data stays for resending
//   receiver: received = steps that arrived completely (exactly once: duplicates and stale epochs
//                        are dropped by the path), applied = steps released by the algorithm
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <span>
#include <vector>

#include "channel/conn_memory.h"
#include "channel/path.h"
#include "channel/step_header.h"
#include "reccl/common/deadline.h"
#include "reccl/common/log.h"
#include "reccl/common/status.h"

namespace reccl::channel {

// Latches the first error of a connection; every later wait fails with it.
class ErrorLatch {
 public:
  // Returns true when this call set the error.
  bool latch(const Status& s);
  bool set() const noexcept { return set_.load(std::memory_order_acquire); }
  Status get() const;

 private:
  std::atomic<bool> set_{false};
  mutable std::mutex mu_;
  Status status_;
};

struct PortId {
  int self = -1;
  int peer = -1;
  int channel = 0;
};

// The hook every path failure is offered to first (failover installs one; without one the port
// latches the failure). Its lifetime is defined: remove() returns only once no thread is inside
// the hook, and no failure reaches the hook after that, so its owner may go right after remove().
// The callers are the threads that drive paths (the socket engine's progress thread, relay and
// verbs path threads, a posting thread whose post was refused), any of them at any time.
// Lock rule: offer() holds mu_ shared while the hook runs; install() and remove() hold it
// exclusively. So the hook must never wait for a thread that may be inside remove() (it decides
// and queues; failover's does).
class PathFailureHook {
 public:
  // Returns true when the failure is being handled (e.g. the connection is being migrated).
  // `self`: the failing path (nullptr: a watcher that is not the port's path), which the port may
  // have replaced since it failed.
  using Fn = std::function<bool(const PortId&, const Path* self, bool isSender, const Status&)>;
  void install(Fn fn);
  void remove() noexcept;
  // Offers a path's failure to the hook: true when the hook took it.
  bool offer(const PortId& id, const Path* self, bool isSender, const Status& s) const;

 private:
  mutable std::shared_mutex mu_;
  Fn fn_;  // under mu_
};

// Shared by all ports of a communicator: abort flag and the hook that sees every path failure
// first.
struct PortEnv {
  std::atomic<bool> aborted{false};
  std::atomic<bool> revoked{false};  // set before `aborted` by recclCommRevoke: waits say so
  PathFailureHook pathFailureHook;
  // The first failure of any of the communicator's ports (a port fails for good): what ends a
  // wait that no port of its own would end, such as a new connection's dial.
  ErrorLatch firstPortFailure;
  // Connections lost for good (PortBase::lose: a peer that died or destroyed its communicator,
  // one with no path left), whether or not a call ran then: the ports, the first such peer, and
  // every such peer. Not a port failed by its own communicator (a failed call, a mismatch, abort).
  std::atomic<uint64_t> lostConnections{0};
  std::atomic<int> firstLostPeer{-1};
  // Set by the communicator when it fails itself: a port lost after that (its peers close
  // their ends in reply) is not counted.
  std::atomic<bool> broken{false};
  // The communicator's own failure, latched before it fails its ports: every wait on any of its
  // ports ends with it, also on a port it could not reach (it only try-locks its port maps, which
  // a lazy connect, a call's port lookup or the failover's port walk may hold at that moment).
  ErrorLatch commFailure;
  mutable std::mutex lostMu;
  std::set<int> lostPeers;  // under lostMu
  void recordLoss(int peer);
  bool peerLost(int peer) const;
  std::atomic<uint64_t> duplicateSteps{0};
  std::atomic<uint64_t> staleSteps{0};
  // CLOCK_MONOTONIC ns of the latest first step completed on a migrated path (see
  // PortBase::armFirstStepStamp): where a failover's stall ends, for benchmarks.
  std::atomic<uint64_t> lastMigrationFirstStepNs{0};
  // CLOCK_MONOTONIC ns, the latest over this communicator's migrated senders, of the moment the
  // work a migration held up moved again: a sender that had unacknowledged steps when its new
  // path started stamps its first ack over that path; one with nothing outstanding stamps the
  // start itself (its new path was ready before anything needed it). Unlike the first-step stamp
  // it does not wait for the algorithm's next step, which may come a call later.
  std::atomic<uint64_t> lastMigrationResumeNs{0};
  // The two stamps again, over moves away from a fault only (armFirstStepStamp's awayFromFault):
  // a fail-back soon after a fault, which restamps the two above, leaves these to the failover.
  std::atomic<uint64_t> lastFaultMoveFirstStepNs{0};
  std::atomic<uint64_t> lastFaultMoveResumeNs{0};
  // A waiting algorithm thread keeps polling this long (yielding its CPU to any other runnable
  // thread there) before it sleeps on the doorbell (RECCL_WAIT_SPIN_US).
  int64_t waitSpinNs = 0;
};

// Lock rule: pathMu_ guards the current and retired paths (setPath takes it; path() is one atomic
// load, never a lock); the error latch has its own. Counters and doorbells are atomics: the
// algorithm's thread and the path's thread meet there, not under a lock. Neither lock is held
// while a path or the failure hook runs.
class PortBase {
 public:
  PortBase(PortId id, ConnMemory mem, PortEnv* env) : id_(id), mem_(std::move(mem)), env_(env) {}
  virtual ~PortBase() = default;
  PortBase(const PortBase&) = delete;
  PortBase& operator=(const PortBase&) = delete;

  const PortId& id() const noexcept { return id_; }
  size_t chunkBytes() const noexcept { return mem_.chunkBytes(); }
  uint32_t slots() const noexcept { return mem_.slots(); }
  ConnCounters* counters() const noexcept { return mem_.counters(); }
  const ConnMemory& memory() const noexcept { return mem_; }
  PortEnv* env() const noexcept { return env_; }
  uint32_t epoch() const noexcept { return epoch_.load(std::memory_order_acquire); }
  void setEpoch(uint32_t e) noexcept { epoch_.store(e, std::memory_order_release); }

  // Path ownership. The algorithm thread calls path() on every post/release while failover may
  // swap the path from another thread: the current path is published atomically, and a replaced
  // one is shut down and kept (retired) until the port goes, so a concurrent notify never touches
  // freed memory.
  Path* path() const noexcept { return pathRaw_.load(std::memory_order_acquire); }
  void setPath(std::unique_ptr<Path> p);

  // A path reports its failure here; unless the failover hook takes it, the port latches it.
  // `self` is the failing path (nullptr: a watcher that is not the port's path, such as the
  // shared-memory liveness socket). A path the port no longer uses is never latched: failover
  // replaces paths while their I/O may still complete, and the peer closing the old socket after
  // its own commit is how a migration looks from here. Callers skip the report when that is
  // already so; it is checked again after the hook, since a commit can land while the hook decides
  // (a migrated receiver hands its new path to the engine without waiting for the failing
  // thread), and the hook then sees no migration in progress and takes the close of the retired
  // path for a dead peer, which would fail both ends' communicators.
  void pathFailed(const Path* self, bool isSender, const Status& s);
  // True (logged at INFO under `subsys`) when `self` is no longer the port's path: its failure is
  // how a migration looks from here, so the path neither warns nor reports it.
  bool replacedPath(const Path* self, const Status& s, LogSubsys subsys) const;
  // Latches `s` and wakes every waiter (both directions); true when this call latched it.
  bool fail(const Status& s);
  // fail(), for a connection lost for good (the peer is gone, or no path is left): also counted
  // as lost in PortEnv.
  void lose(const Status& s);
  bool failed() const noexcept { return latch_.set(); }
  Status error() const { return latch_.get(); }
  // Why a wait on this port would return at once, if it would: the port's failure, else its
  // communicator's failure or abort.
  std::optional<Status> stopReason() const;
  // What a loop that polls ports instead of waiting on one checks.
  bool stopped() const { return stopReason().has_value(); }
  // Wakes all waiters so they re-check abort/error flags.
  void wakeAll() noexcept;
  // Failover calls this just before a migrated path starts: the next step completed on this
  // port (an ack advancing at the sender, a step landing at the receiver) stamps
  // env()->lastMigrationFirstStepNs. One relaxed load per step otherwise.
  // The first step's delay after the arm is logged (INFO, FAILOVER): per connection, where the
  // stall after a commit went (the bench's stall is the latest of these over all connections).
  // A sender also stamps env()->lastMigrationResumeNs: now when nothing is outstanding, else at
  // that first ack. `awayFromFault` (a failover, not a fail-back or rebalance): the lastFaultMove
  // stamps too.
  void armFirstStepStamp(bool awayFromFault) noexcept;

 protected:
  // Destroys the path and the retired ones; each leaves its progress thread on the way
  // (SocketEngine::remove). The derived destructors call it first: until then that thread may
  // still be in this port (frames, acks, a failure), so no part of the port may be gone yet.
  void releasePaths() noexcept;
  template <typename Ready>
  Status waitUntil(Doorbell& bell, Ready ready, Deadline deadline, const char* what);

  PortId id_;
  ConnMemory mem_;
  PortEnv* env_;
  std::atomic<uint32_t> epoch_{1};
  std::mutex pathMu_;
  std::unique_ptr<Path> path_;
  std::atomic<Path*> pathRaw_{nullptr};
  std::vector<std::unique_ptr<Path>> retired_;
  ErrorLatch latch_;
  // What armFirstStepStamp armed, one atomic so the step that takes it reads one arm's flags
  // whole (a retired path's late ack may race a later commit's arm).
  static constexpr uint8_t kArmed = 1;      // the next step stamps
  static constexpr uint8_t kWaiting = 2;    // a sender with steps outstanding at the arm
  static constexpr uint8_t kFaultMove = 4;  // the move is away from a fault
  std::atomic<uint8_t> arm_{0};
  std::atomic<uint64_t> armedNs_{0};
  bool spinHot_ = true;  // algorithm thread: the last slow wait ended soon (see waitUntil)
  // step: the step received (receiver) or acknowledged (sender).
  void stampFirstStep(uint64_t step) noexcept;
};

class SendPort : public PortBase {
 public:
  SendPort(PortId id, ConnMemory mem, PortEnv* env);
  ~SendPort() override { releasePaths(); }
  // The payload area (chunkBytes) of the next slot, once the receiver has acked its previous use.
  Result<std::span<std::byte>> acquire(Deadline deadline);
  // Commits the acquired slot as the next step carrying `bytes` of payload.
  Status post(size_t bytes, const CollDesc& desc);

  // Direct send: commits the acquired slot as the next step whose payload stays in the caller's
  // memory (`payload`, `bytes`); only the header is written into the slot. Valid while
  // sendsDirect() holds (a transport that sends header and payload as separate pieces).
  // The caller keeps `payload` mapped and unchanged until the receiver has received the step,
  // and mapped until it has acked it (waitAcked(lastDirect())): a resend before the ack reads it.
  Status postDirect(const void* payload, size_t bytes, const CollDesc& desc);
  bool sendsDirect() const noexcept;
  // The latest step posted with postDirect (0: none).
  uint64_t lastDirect() const noexcept { return lastDirect_; }
  // Waits until the receiver has acked `step`.
  Status waitAcked(uint64_t step, Deadline deadline);

  uint64_t posted() const noexcept { return counters()->posted.load(std::memory_order_acquire); }
  uint64_t acked() const noexcept { return counters()->consumed.load(std::memory_order_acquire); }
  // Header + payload of a posted step as one contiguous frame in its slot (acked < step <=
  // posted). A direct step's payload is copied into its slot first (once), so transports that
  // need one piece (relay pipes) read the same bytes as a path that sends the parts.
  std::span<const std::byte> frame(uint64_t step) const noexcept;
  // Header (in the slot) and payload (slot or the caller's memory) of a posted step, for
  // transports that send them as two pieces (no copy for direct steps).
  struct FrameParts {
    std::span<const std::byte> header;
    std::span<const std::byte> payload;
  };
  FrameParts frameParts(uint64_t step) const noexcept;
  // Transports call this when an ack arrives.
  void onAck(uint64_t applied) noexcept;

 private:
  Status commit(size_t bytes, const CollDesc& desc, const std::byte* direct);
  // Per slot: the caller's payload of a direct step still outside its slot, else null.
  std::unique_ptr<std::atomic<const std::byte*>[]> external_;
  uint64_t lastDirect_ = 0;  // algorithm thread only
};

class RecvPort : public PortBase {
 public:
  using PortBase::PortBase;
  ~RecvPort() override { releasePaths(); }
  // The payload of the next step, checked against the collective this rank is running.
  Result<std::span<const std::byte>> wait(Deadline deadline, const CollDesc& expect);
  // Marks the step returned by wait() as applied; its slot goes back to the sender.
  Status release();

  uint64_t received() const noexcept { return counters()->posted.load(std::memory_order_acquire); }
  uint64_t applied() const noexcept { return counters()->consumed.load(std::memory_order_acquire); }
  // Transports (tcp) call this after a step landed completely in its slot.
  void onReceived(uint64_t step) noexcept;

  // Direct receive: the algorithm names where the payload of an upcoming step goes (its final
  // place in the user's buffer) so that a transport which learns it before the payload arrives
  // writes it there instead of into the slot, and the algorithm skips the copy out of the slot.
  // Only a hint: a transport that does not look (shared memory, relay) or a step whose header
  // came first fills the slot as before, and wait()'s caller copies (see landedDirect()). Two
  // targets at a time (a pipelined ring names the next round's while this round's is pending);
  // a third replaces the older one, whose step must have been waited for by then.
  // Exactness under failover: a step half-written to the target by a failed path is received
  // again in full (into the target or the slot) on the next path; a retired socket's last
  // receive can only copy the same step's bytes to the same offsets (a resend carries the same
  // payload), and its socket is shut down before the next path starts.
  void expectDirect(uint64_t step, void* dst, size_t bytes) noexcept;
  // Transports, on the header of `step` (the next step, `bytes` of payload): the registered
  // target, or null for the slot.
  std::byte* directTarget(uint64_t step, size_t bytes) const noexcept;
  // Transports, before onReceived(step): the payload of `step` went to directTarget().
  void onLandedDirect(uint64_t step) noexcept;
  // After wait(): whether the step it returned already sits at `dst`, its direct target (its
  // header is still in the slot; the payload span wait() returned is then stale).
  bool landedDirect(const void* dst) const noexcept;

 private:
  bool holding_ = false;
  // Written by the algorithm thread, read by transports; `step` is the seqlock word: a reader
  // takes the target only if the step reads the same before and after.
  struct DirectTarget {
    std::atomic<uint64_t> step{0};
    std::atomic<std::byte*> dst{nullptr};
    std::atomic<size_t> bytes{0};
    // == step once its payload landed here; per target, since the next round's step can land
    // before the algorithm has taken this one.
    std::atomic<uint64_t> landed{0};
  };
  DirectTarget direct_[2];
};

}  // namespace reccl::channel
