#include "failover/health/peer_loss.h"

#include <algorithm>
#include <map>

namespace reccl::failover {

bool lostRateCrossed(const LossCount& c, uint64_t ratePpm) noexcept {
  // More lost than sent: segments without data (SYN, FIN) retransmitted alone.
  const uint64_t ppm = c.lost >= c.sent ? (c.lost ? 1'000'000 : 0) : c.lost * 1'000'000 / c.sent;
  const uint64_t due = c.sent * ratePpm / 1'000'000;
  const uint64_t excess = c.lost > due ? c.lost - due : 0;
  return ppm >= ratePpm && excess * excess >= 9 * c.lost;
}

bool windowIsGray(const LossCount& c, const LossRule& rule) noexcept {
  if (c.lost < std::max<uint64_t>(1, rule.threshold)) return false;
  return rule.ratePpm == 0 || lostRateCrossed(c, rule.ratePpm);
}

bool poolIsGray(const LossCount& c, int windows, const LossRule& rule) noexcept {
  if (!rule.pool || rule.ratePpm == 0 || windows < 2 || c.lost < std::max<uint64_t>(1, rule.threshold)) return false;
  // Thin: sent / windows < threshold / rate, in integers.
  if (c.sent * rule.ratePpm >= rule.threshold * 1'000'000 * static_cast<uint64_t>(windows)) return false;
  return lostRateCrossed(c, rule.ratePpm);
}

PeerLossWindows::PeerLossWindows(uint64_t windowNs, int windows)
    : windowNs_(std::max<uint64_t>(1, windowNs)), windows_(static_cast<size_t>(std::max(1, windows))) {}

void PeerLossWindows::beginRound(uint64_t nowNs) {
  index_ = nowNs / windowNs_ + 1;
  for (Window& w : windows_)
    if (w.index != 0 && !live(w)) w = Window{};
  for (auto& [id, seen] : paths_) seen.inRound = false;
}

void PeerLossWindows::add(uint64_t pathId, int peer, uint64_t lost, uint64_t sent) {
  auto [it, fresh] = paths_.try_emplace(pathId, Seen{lost, sent, true});
  Seen& s = it->second;
  s.inRound = true;
  if (fresh) return;
  // A 32-bit counter that wrapped (sent never falls; lost falls by a late D-SACK's few): counts
  // from here.
  const bool wrapped = sent < s.sent || s.lost - std::min(lost, s.lost) > (1ull << 31);
  const int64_t dl = static_cast<int64_t>(lost) - static_cast<int64_t>(s.lost);
  const int64_t ds = static_cast<int64_t>(sent) - static_cast<int64_t>(s.sent);
  s.lost = lost;
  s.sent = sent;
  if (wrapped) return;
  Window& w = windows_[index_ % windows_.size()];
  if (w.index != index_) w = Window{index_, {}};
  auto p = std::find_if(w.peers.begin(), w.peers.end(), [&](const PeerSums& x) { return x.peer == peer; });
  if (p == w.peers.end()) p = w.peers.insert(w.peers.end(), PeerSums{peer});
  p->lost += dl;
  p->sent += ds;
}

void PeerLossWindows::endRound() {
  std::erase_if(paths_, [](const auto& kv) { return !kv.second.inRound; });
}

PeerLossWindows::Net PeerLossWindows::sums(const Window& w, const Witness& witness, bool* any) {
  Net n;
  for (const PeerSums& p : w.peers) {
    if (!witness(p.peer)) continue;
    n.lost += p.lost;
    n.sent += p.sent;
    if (any) *any = true;
  }
  return n;
}

LossCount PeerLossWindows::Net::count() const noexcept {
  return {static_cast<uint64_t>(std::max<int64_t>(0, lost)), static_cast<uint64_t>(std::max<int64_t>(0, sent))};
}

LossCount PeerLossWindows::running(const Witness& witness) const {
  if (index_ == 0) return {};
  const Window& w = windows_[index_ % windows_.size()];
  return w.index == index_ ? sums(w, witness, nullptr).count() : LossCount{};
}

LossCount PeerLossWindows::kept(const Witness& witness, int* windows) const {
  // Net over the windows: a late D-SACK in one takes back a retransmit counted in an earlier one.
  Net total;
  int n = 0;
  for (const Window& w : windows_) {
    if (!live(w)) continue;
    bool any = false;
    const Net c = sums(w, witness, &any);
    total.lost += c.lost;
    total.sent += c.sent;
    n += any ? 1 : 0;
  }
  if (windows) *windows = n;
  return total.count();
}

bool PeerLossWindows::gray(const LossRule& rule, const Witness& witness) const {
  const LossCount run = running(witness);
  if (run.lost >= std::max<uint64_t>(1, rule.threshold)) return windowIsGray(run, rule);
  int n = 0;
  const LossCount pool = kept(witness, &n);
  return poolIsGray(pool, n, rule);
}

std::vector<int> PeerLossWindows::losingPeers(const Witness& witness) const {
  std::map<int, int64_t> lost;
  for (const Window& w : windows_)
    if (live(w))
      for (const PeerSums& p : w.peers)
        if (witness(p.peer)) lost[p.peer] += p.lost;
  std::vector<int> out;
  for (const auto& [peer, n] : lost)
    if (n > 0) out.push_back(peer);
  return out;
}

void PeerLossWindows::reset() {
  if (index_ == 0 && paths_.empty()) return;  // the monitor resets an idle rail's on every turn
  for (Window& w : windows_) w = Window{};
  paths_.clear();
  index_ = 0;
}

}  // namespace reccl::failover
