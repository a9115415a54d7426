// Rail health as this rank knows it: its own rails (an atomic bit mask and a per-rail epoch: one
// load each, for any thread), its peers' rails (from their migration requests and replies), and
// what the gray-failure rule (gray.h) needs: when peers last reported a rail down, when planned
// moves left a healthy rail, the DEGRADED signals held.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "failover/health/gray.h"

namespace reccl::failover {

inline constexpr int kMaxRails = 64;

// Where a fault was first seen.
enum class FaultSource : uint8_t { kDetector, kPoll, kSocketError, kStall, kPeer, kDaemon, kStandby };
const char* faultSourceName(FaultSource s) noexcept;

// A DEGRADED held because a known fault explains it (gray.h), and the rail's last hard fault.
struct GrayHold {
  uint64_t sinceNs = 0;      // 0: nothing held
  uint64_t explainedNs = 0;  // last time a known fault still explained it
  uint64_t upNs = 0;         // the rail last came back up here after a hard fault
  bool hardDown = false;     // the rail is down here for a hard fault (not DEGRADED)
  FaultSource src = FaultSource::kDetector;
};

// Lock rule: the masks and stamps are atomics (any thread); peerMu_ guards peerUp_; the gray
// holds belong to the monitor thread alone.
class RailState {
 public:
  RailState(int nrails, int nranks = 0);
  void setRanks(int nranks, int self);

  int nrails() const noexcept { return nrails_; }
  bool up(int rail) const noexcept {
    return rail >= 0 && rail < kMaxRails && (up_.load(std::memory_order_acquire) >> rail) & 1u;
  }
  uint64_t upMask() const noexcept { return up_.load(std::memory_order_acquire); }
  uint64_t epoch(int rail) const noexcept {
    return rail >= 0 && rail < kMaxRails ? epoch_[rail].load(std::memory_order_acquire) : 0;
  }
  // True when the rail was up (down) before: the caller acts on the change.
  bool markDown(int rail) noexcept;
  bool markUp(int rail) noexcept;
  // Rails out here for DEGRADED alone (a gray rail still carries bytes), not for a hard fault:
  // set by the monitor as it declares them, cleared when they come back or go hard down.
  uint64_t grayMask() const noexcept { return gray_.load(std::memory_order_acquire); }
  void setGray(int rail, bool gray) noexcept {
    if (rail < 0 || rail >= kMaxRails) return;
    const uint64_t bit = 1ull << rail;
    if (gray)
      gray_.fetch_or(bit, std::memory_order_acq_rel);
    else
      gray_.fetch_and(~bit, std::memory_order_acq_rel);
  }
  void bumpEpoch(int rail) noexcept { epoch_[rail].fetch_add(1, std::memory_order_acq_rel); }

  // A peer's rails as its last migration message said (all up until it says otherwise).
  uint64_t peerRails(int peer);
  // Records a peer's report; returns the rails it has up again (they were down there until now).
  uint64_t setPeerRails(int peer, uint64_t mask, uint64_t nowNs);
  // The peer has `rail` up, and none of its reports within windowNs had any of its rails down or
  // up again: what this rank's connections to it lose is no fault of the peer's that it told.
  bool peerHealthy(int peer, int rail, uint64_t nowNs, uint64_t windowNs);
  // A fail-back or rebalance moved a connection off `rail` while healthy at both ends.
  void markLeft(int rail, uint64_t nowNs) noexcept { leftNs_[rail].store(nowNs, std::memory_order_release); }

  // Monitor thread only.
  GrayHold& hold(int rail) { return holds_[rail]; }
  bool anyHeld() const;
  GrayFacts grayFacts(int rail, uint64_t nowNs, uint64_t windowNs);
  // For the held-signal log line: when a peer last reported the rail, when moves last left it.
  uint64_t peerReportNs(int rail) const noexcept { return peerDownNs_[rail].load(std::memory_order_acquire); }
  uint64_t leftNs(int rail) const noexcept { return leftNs_[rail].load(std::memory_order_acquire); }

 private:
  int nrails_;
  int self_ = -1;
  std::atomic<uint64_t> up_{0};
  std::atomic<uint64_t> gray_{0};
  std::array<std::atomic<uint64_t>, kMaxRails> epoch_{};
  std::mutex peerMu_;
  std::vector<uint64_t> peerUp_;  // under peerMu_
  std::vector<uint64_t> peerFaultNs_;  // under peerMu_: a report had a rail down, or up again (0: never)
  // Last time a peer's railsUp had each rail down, or first had it up again after down.
  std::array<std::atomic<uint64_t>, kMaxRails> peerDownNs_{};
  // Last time a fail-back or rebalance moved a connection off each rail while the rail was
  // healthy at both ends: the retired sockets close with data in flight and retransmit a while.
  std::array<std::atomic<uint64_t>, kMaxRails> leftNs_{};
  std::vector<GrayHold> holds_;
};

}  // namespace reccl::failover
