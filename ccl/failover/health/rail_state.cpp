#include "failover/health/rail_state.h"

#include <algorithm>

namespace reccl::failover {

const char* faultSourceName(FaultSource s) noexcept {
  switch (s) {
    case FaultSource::kDetector: return "detector";
    case FaultSource::kPoll: return "nic-poll";
    case FaultSource::kSocketError: return "socket-error";
    case FaultSource::kStall: return "stall";
    case FaultSource::kPeer: return "peer";
    case FaultSource::kDaemon: return "daemon";
    case FaultSource::kStandby: return "standby";
  }
  return "?";
}

RailState::RailState(int nrails, int nranks) : nrails_(std::clamp(nrails, 1, kMaxRails)), holds_(nrails_) {
  up_.store(nrails_ >= 64 ? ~0ull : ((1ull << nrails_) - 1));
  setRanks(nranks, -1);
}

void RailState::setRanks(int nranks, int self) {
  std::lock_guard lk(peerMu_);
  self_ = self;
  peerUp_.assign(static_cast<size_t>(std::max(nranks, 0)), up_.load());
  peerFaultNs_.assign(peerUp_.size(), 0);
}

bool RailState::markDown(int rail) noexcept {
  uint64_t bit = 1ull << rail;
  return (up_.fetch_and(~bit) & bit) != 0;
}

bool RailState::markUp(int rail) noexcept {
  uint64_t bit = 1ull << rail;
  return (up_.fetch_or(bit) & bit) == 0;
}

uint64_t RailState::peerRails(int peer) {
  std::lock_guard lk(peerMu_);
  return peer >= 0 && static_cast<size_t>(peer) < peerUp_.size() ? peerUp_[peer] : 0;
}

uint64_t RailState::setPeerRails(int peer, uint64_t mask, uint64_t nowNs) {
  uint64_t gained = 0;
  std::lock_guard lk(peerMu_);
  const uint64_t all = nrails_ >= 64 ? ~0ull : ((1ull << nrails_) - 1);
  if (peer >= 0 && static_cast<size_t>(peer) < peerUp_.size()) {
    gained = mask & ~peerUp_[peer];
    peerUp_[peer] = mask;
    if ((all & ~mask) || gained) peerFaultNs_[peer] = nowNs;
  }
  // A rail the peer reports up again was down there until now: its fault ends now, not at the
  // last report that said down (the sockets that backed off meanwhile retransmit once it is
  // back).
  for (int r = 0; r < nrails_; ++r)
    if (!((mask >> r) & 1u) || ((gained >> r) & 1u)) peerDownNs_[r].store(nowNs, std::memory_order_release);
  return gained;
}

bool RailState::peerHealthy(int peer, int rail, uint64_t nowNs, uint64_t windowNs) {
  std::lock_guard lk(peerMu_);
  if (peer < 0 || static_cast<size_t>(peer) >= peerUp_.size() || rail < 0 || rail >= nrails_) return false;
  if (!((peerUp_[peer] >> rail) & 1u)) return false;
  const uint64_t t = peerFaultNs_[peer];
  return t == 0 || nowNs - std::min(t, nowNs) >= windowNs;
}

bool RailState::anyHeld() const {
  return std::any_of(holds_.begin(), holds_.end(), [](const GrayHold& h) { return h.sinceNs != 0; });
}

GrayFacts RailState::grayFacts(int rail, uint64_t nowNs, uint64_t windowNs) {
  GrayFacts f;
  f.nowNs = nowNs;
  f.windowNs = windowNs;
  f.peerReportNs = peerDownNs_[rail].load(std::memory_order_acquire);
  f.leftNs = leftNs_[rail].load(std::memory_order_acquire);
  f.upHereNs = holds_[rail].upNs;
  std::lock_guard lk(peerMu_);
  for (size_t p = 0; p < peerUp_.size(); ++p)
    if (static_cast<int>(p) != self_ && !((peerUp_[p] >> rail) & 1u)) f.downAtAPeer = true;
  return f;
}

}  // namespace reccl::failover
