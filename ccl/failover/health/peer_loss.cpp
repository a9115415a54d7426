#include "failover/health/peer_loss.h"

#include <algorithm>

namespace reccl::failover {

bool lossIsGray(const LossCount& c, const LossRule& rule) noexcept {
  if (c.lost < std::max<uint64_t>(1, rule.threshold)) return false;
  return rule.perMille == 0 || c.lost * 1000 >= rule.perMille * c.sent;
}

PeerLossWindows::PeerLossWindows(uint64_t windowNs, int windows)
    : windowNs_(std::max<uint64_t>(1, windowNs)), windows_(static_cast<size_t>(std::max(1, windows))) {}

void PeerLossWindows::beginRound(uint64_t nowNs) {
  index_ = nowNs / windowNs_ + 1;
  // A window older than the kept span holds nothing of it.
  for (Window& w : windows_)
    if (w.index != 0 && w.index + windows_.size() <= index_) w = Window{};
  for (auto& [id, seen] : paths_) seen.inRound = false;
}

PeerLossWindows::Window& PeerLossWindows::current() {
  Window& w = windows_[index_ % windows_.size()];
  if (w.index != index_) w = Window{index_, 0, 0, {}};
  return w;
}

void PeerLossWindows::add(uint64_t pathId, int peer, uint64_t lost, uint64_t sent) {
  auto [it, fresh] = paths_.try_emplace(pathId, Seen{lost, sent, true});
  Seen& s = it->second;
  s.inRound = true;
  if (fresh) return;
  if (sent < s.sent) {  // the 32-bit counter wrapped: counts from here
    s.lost = lost;
    s.sent = sent;
    return;
  }
  Window& w = current();
  const int64_t dl = static_cast<int64_t>(lost) - static_cast<int64_t>(s.lost);
  w.lost += dl;
  w.sent += static_cast<int64_t>(sent) - static_cast<int64_t>(s.sent);
  if (dl > 0 && std::find(w.peers.begin(), w.peers.end(), peer) == w.peers.end()) w.peers.push_back(peer);
  s.lost = lost;
  s.sent = sent;
}

void PeerLossWindows::endRound() {
  std::erase_if(paths_, [](const auto& kv) { return !kv.second.inRound; });
}

LossCount PeerLossWindows::sum() const {
  int64_t lost = 0, sent = 0;
  for (const Window& w : windows_) {
    if (w.index == 0 || w.index + windows_.size() <= index_) continue;
    lost += w.lost;
    sent += w.sent;
  }
  return {static_cast<uint64_t>(std::max<int64_t>(0, lost)), static_cast<uint64_t>(std::max<int64_t>(0, sent))};
}

std::vector<int> PeerLossWindows::losingPeers() const {
  std::vector<int> out;
  for (const Window& w : windows_) {
    if (w.index == 0 || w.index + windows_.size() <= index_) continue;
    out.insert(out.end(), w.peers.begin(), w.peers.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void PeerLossWindows::reset() {
  if (index_ == 0 && paths_.empty()) return;  // the monitor resets an idle rail's on every turn
  for (Window& w : windows_) w = Window{};
  paths_.clear();
  index_ = 0;
}

}  // namespace reccl::failover
