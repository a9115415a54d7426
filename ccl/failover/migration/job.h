// What the migrator threads work on: jobs this rank initiates (a connection to move, or a standby
// to open) and the timeline one migration records for its log line.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>

#include "failover/health/rail_state.h"
#include "failover/migration/migrate_wire.h"

namespace reccl::channel {
class Path;
}

namespace reccl::failover {

struct EarlyRequest;  // migration.h

struct Job {
  ConnId id;
  MigrateReason reason = MigrateReason::kLinkDown;  // kStandby: open a standby path, move nothing
  FaultSource source = FaultSource::kPoll;
  int fromRail = -1;     // the rail being left (-1: any)
  int toRail = -1;       // fail-back target (-1: choose)
  uint64_t faultNs = 0;  // first signal (CLOCK_MONOTONIC)
  uint64_t emitNs = 0;   // in-process detector: its decision; the monitor read it at seenNs
  uint64_t seenNs = 0;
  uint64_t queuedNs = 0;
  // Only while the port still runs this path (null: always). A path that failed while a
  // handshake of this connection was in flight is moved only if that handshake did not replace it.
  const channel::Path* ifPath = nullptr;
  // Begun on the monitor thread (Migration::beginEarly): the request sent on the connection's
  // standby; the monitor reads the reply (concludeEarly). Never on a queued job.
  std::shared_ptr<EarlyRequest> early{};
  // A verdict reached some time after its first signal (leftOnRetiredPath): at least one attempt
  // when it runs, as a stall verdict has (failoverBudgetMs).
  bool attemptAtLeastOnce = false;
};

// The move of the stall check's verdict on `path`, which a connection ran on `rail` when the
// check read it (the rail read first: a commit sets the path, then the rail), quiet for quietMs
// at nowNs. Only while the port still runs that path: the sample and the verdict take time, and
// a move the peer committed meanwhile (its own stall check saw the same silence) has replaced
// the path; moving the new one would take the connection back onto the stalled rail.
inline Job stallMove(ConnId id, int rail, const channel::Path* path, uint32_t quietMs, uint64_t nowNs) noexcept {
  return Job{.id = id,
             .reason = MigrateReason::kStall,
             .source = FaultSource::kStall,
             .fromRail = rail,
             .faultNs = nowNs - std::min<uint64_t>(nowNs, static_cast<uint64_t>(quietMs) * 1000000ull),
             .ifPath = path};
}

// The move of a connection left on the path its last commit retired (Conn::retired: that commit
// shut the old path down and then failed, and nothing replaced it), on `rail`: due once the
// peer, whose handshake it usually was and who tries again at once when it can reach this end,
// has had `graceMs` for that; none before, or when the port runs another path. Its first signal
// is the retirement, so an unreachable peer fails the connection RECCL_FAILOVER_TIMEOUT_MS after
// it (at least one attempt after this verdict).
inline std::optional<Job> leftOnRetiredPath(ConnId id, int rail, const channel::Path* current,
                                            const channel::Path* retired, uint64_t retiredNs, uint64_t nowNs,
                                            int64_t graceMs) noexcept {
  if (!current || current != retired) return std::nullopt;
  if (nowNs < retiredNs + static_cast<uint64_t>(std::max<int64_t>(0, graceMs)) * 1000000ull) return std::nullopt;
  return Job{.id = id,
             .reason = MigrateReason::kSocketError,
             .source = FaultSource::kSocketError,
             .fromRail = rail,
             .faultNs = retiredNs,
             .ifPath = current,
             .attemptAtLeastOnce = true};
}

// How long a job may still try at nowNs, when it runs (ms, at least 1): RECCL_FAILOVER_TIMEOUT_MS
// (timeoutMs) from the fault's first signal; a move of the stall check's verdict at least one
// attempt (attemptMs). Its faultNs (the timeline's signal) is when the path fell quiet, the stall
// time before the verdict: with a stall time at or near the failover timeout, counting from there
// alone would fail the connection without a try.
inline int64_t failoverBudgetMs(const Job& j, uint64_t nowNs, int64_t timeoutMs, int64_t attemptMs) noexcept {
  const int64_t since = j.faultNs ? static_cast<int64_t>((nowNs - std::min(j.faultNs, nowNs)) / 1'000'000) : 0;
  int64_t left = timeoutMs - since;
  if (j.reason == MigrateReason::kStall || j.attemptAtLeastOnce) left = std::max(left, attemptMs);
  return std::max<int64_t>(1, left);
}

// Where one migration's time went (CLOCK_MONOTONIC ns; 0: not reached). Logged with the failover
// line (Migration::log) so a benchmark's log shows the split per fault.
struct Timeline {
  uint64_t signalNs = 0;   // first signal of the fault
  uint64_t emitNs = 0;     // in-process detector: its state machine decided (0: another source)
  uint64_t seenNs = 0;     // in-process detector: the monitor drained the event (it drives the detector)
  uint64_t queuedNs = 0;   // job queued (monitor) / hello or request seen (passive end)
  uint64_t runningNs = 0;  // a migrator thread runs it
  uint64_t pathNs = 0;     // new path ready: connected, or standby taken (passive end: the
                           // connection's lock held and the peer's record read)
  uint64_t sentNs = 0;     // hello + request sent (passive end: reply sent)
  uint64_t replyNs = 0;    // reply received (passive end: request read)
  uint64_t commitNs = 0;   // new path committed and started
  bool standby = false;    // the path was a pre-connected standby
  // The monitor sent the request and read the reply (Migration::beginEarly, concludeEarly):
  // queuedNs is when it began; no migrator thread ran (runningNs 0).
  bool early = false;
};

// One handshake's outcome at the initiator.
// kPeerFailed: the peer's communicator failed (MigrateStatus::kPeerFailed) or the peer is gone (its
// kernel refused the connect); nothing else will work.
enum class Attempt { kDone, kStale, kNotReady, kFailed, kPeerFailed };

// What a committed move did: for the log line and the counters.
struct Moved {
  uint32_t epoch = 0;
  int fromRail = -1;   // the rail the connection left
  uint64_t resent = 0; // payload bytes resent (sender end)
  uint64_t replySentNs = 0;  // the passive end's reply left (0: none sent here)
  // A receiver's wait for its old path to let nothing more land (Path::stopLanding).
  uint64_t quiescedNs = 0;
  // The step the move took up from: a sender resends after it, a receiver had received it once
  // its old path was quiet. For the log: the two ends' lines must agree.
  uint64_t step = 0;
};

}  // namespace reccl::failover
