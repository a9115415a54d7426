#include "reccl/detector/link_state_machine.h"

#include <algorithm>
#include <cmath>

namespace reccl::detector {

const char* linkStateName(LinkState s) noexcept {
  switch (s) {
    case LinkState::kUp: return "up";
    case LinkState::kDown: return "down";
    case LinkState::kDegraded: return "degraded";
  }
  return "unknown";
}

const char* linkEventTypeName(LinkEventType t) noexcept {
  switch (t) {
    case LinkEventType::kLinkDown: return "link_down";
    case LinkEventType::kLinkUp: return "link_up";
    case LinkEventType::kLinkDegraded: return "link_degraded";
  }
  return "unknown";
}

double LinkStateMachine::decayed(double penalty, uint64_t dtNs, uint64_t halfLifeNs) noexcept {
  if (penalty <= 0) return 0;
  if (halfLifeNs == 0) return 0;
  return penalty * std::exp2(-static_cast<double>(dtNs) / static_cast<double>(halfLifeNs));
}

uint64_t LinkStateMachine::timeToDecayNs(double penalty, double target, uint64_t halfLifeNs) noexcept {
  if (penalty <= target || target <= 0) return 0;
  double t = static_cast<double>(halfLifeNs) * std::log2(penalty / target);
  return static_cast<uint64_t>(std::ceil(t)) + 1;
}

void LinkStateMachine::addLink(LinkKey key, std::string ifname, bool physicallyUp, uint64_t nowNs) {
  Link l;
  l.ifname = std::move(ifname);
  l.physUp = physicallyUp;
  l.declared = physicallyUp ? LinkState::kUp : LinkState::kDown;
  l.physUpSinceNs = nowNs;
  l.penaltyNs = nowNs;
  l.lastChangeNs = nowNs;
  links_[key] = std::move(l);
}

void LinkStateMachine::removeLink(LinkKey key) { links_.erase(key); }

double LinkStateMachine::penaltyNow(const Link& l, uint64_t nowNs) const {
  uint64_t dt = nowNs > l.penaltyNs ? nowNs - l.penaltyNs : 0;
  return decayed(l.penalty, dt, params_.damping.halfLifeNs);
}

void LinkStateMachine::addFlap(Link& l, uint64_t nowNs) {
  const auto& d = params_.damping;
  l.penalty = std::min(penaltyNow(l, nowNs) + d.penaltyPerFlap, d.maxPenalty);
  l.penaltyNs = nowNs;
  l.flaps++;
  if (l.penalty >= d.suppressThreshold) l.suppressed = true;
}

LinkEvent LinkStateMachine::makeEvent(LinkEventType type, LinkKey key, const Link& l,
                                      const LinkSignal& first, uint64_t nowNs) const {
  LinkEvent e;
  e.type = type;
  e.link = key;
  e.ifname = l.ifname;
  e.kind = first.kind;
  e.source = first.source;
  e.signalNs = first.tsNs;
  e.emitNs = nowNs;
  e.penalty = penaltyNow(l, nowNs);
  e.flaps = l.flaps;
  return e;
}

void LinkStateMachine::onSignal(const LinkSignal& s, uint64_t nowNs, std::vector<LinkEvent>& out) {
  counters_.signals++;
  Direction dir = directionOf(s.kind);
  if (dir == Direction::kNone) return;
  auto it = links_.find(s.link);
  if (it == links_.end()) {
    counters_.unknownLink++;
    return;
  }
  Link& l = it->second;
  if (!s.ifname.empty() && l.ifname.empty()) l.ifname = s.ifname;

  // The device's own carrier transition count orders reports of different sources: a slow
  // source's report of an old transition must not undo what a fast source already reported.
  if (s.carrierSeq && (dir == Direction::kDown || dir == Direction::kUp)) {
    if (l.lastSeq && *s.carrierSeq < *l.lastSeq) {
      counters_.stale++;
      return;
    }
    l.lastSeq = s.carrierSeq;
  }
  // Carrier losses the kernel counted but no source reported one by one (a storm inside one
  // link-watch period): each is a flap for damping. The transition this signal reports, if a
  // down, is counted below.
  if (s.carrierDowns) {
    if (l.lastDowns && *s.carrierDowns > *l.lastDowns) {
      uint32_t unseen = *s.carrierDowns - *l.lastDowns;
      if (dir == Direction::kDown && l.physUp) unseen--;
      uint32_t applied = 0;
      for (; applied < unseen && l.penalty < params_.damping.maxPenalty; ++applied) addFlap(l, nowNs);
      l.flaps += unseen - applied;  // the penalty is capped; the count stays exact
    }
    if (!l.lastDowns || *s.carrierDowns > *l.lastDowns) l.lastDowns = s.carrierDowns;
    // Damped by flaps no source saw one by one: the link is not usable even if it is up now.
    if (l.suppressed && l.declared != LinkState::kDown) {
      l.declared = LinkState::kDown;
      l.lastChangeNs = nowNs;
      l.physUpSinceNs = nowNs;
      l.firstUp = s;
      l.deadlineNs = l.physUp ? nowNs + params_.holdDownNs : 0;
      LinkSignal why = s;
      if (directionOf(why.kind) != Direction::kDown) why.kind = RECCL_LINK_KIND_CARRIER_DOWN;
      out.push_back(makeEvent(LinkEventType::kLinkDown, it->first, l, why, nowNs));
      if (dir != Direction::kDown) return;
    }
  }

  switch (dir) {
    case Direction::kDown: {
      if (!l.physUp) {
        l.debounced++;
        counters_.debounced++;
        return;
      }
      l.physUp = false;
      addFlap(l, nowNs);
      l.lastChangeNs = nowNs;
      if (l.declared != LinkState::kDown) {
        l.declared = LinkState::kDown;
        l.deadlineNs = 0;
        out.push_back(makeEvent(LinkEventType::kLinkDown, it->first, l, s, nowNs));
      } else {
        l.deadlineNs = 0;  // was in hold-down: the up period ends unannounced
      }
      return;
    }
    case Direction::kUp: {
      if (l.physUp) {
        l.debounced++;
        counters_.debounced++;
        return;
      }
      l.physUp = true;
      l.physUpSinceNs = nowNs;
      l.firstUp = s;
      l.deadlineNs = nowNs + params_.holdDownNs;
      return;
    }
    case Direction::kDegraded: {
      if (!l.physUp || l.declared == LinkState::kDown) {
        l.debounced++;
        counters_.debounced++;
        return;
      }
      l.lastGrayNs = nowNs;
      l.deadlineNs = nowNs + params_.degradedClearNs;
      if (l.declared == LinkState::kUp) {
        l.declared = LinkState::kDegraded;
        l.lastChangeNs = nowNs;
        addFlap(l, nowNs);
        out.push_back(makeEvent(LinkEventType::kLinkDegraded, it->first, l, s, nowNs));
      } else {
        l.debounced++;
        counters_.debounced++;
      }
      return;
    }
    case Direction::kNone:
      return;
  }
}

void LinkStateMachine::onTick(uint64_t nowNs, std::vector<LinkEvent>& out) {
  for (auto& [key, l] : links_) {
    if (l.deadlineNs == 0 || l.deadlineNs > nowNs) continue;
    l.deadlineNs = 0;
    if (l.declared == LinkState::kDown && l.physUp) {
      if (nowNs - l.physUpSinceNs < params_.holdDownNs) {
        l.deadlineNs = l.physUpSinceNs + params_.holdDownNs;
        continue;
      }
      double p = penaltyNow(l, nowNs);
      if (l.suppressed && p >= params_.damping.reuseThreshold) {
        counters_.suppressedUps++;
        l.deadlineNs = nowNs + timeToDecayNs(p, params_.damping.reuseThreshold,
                                             params_.damping.halfLifeNs);
        continue;
      }
      l.suppressed = false;
      l.declared = LinkState::kUp;
      l.lastChangeNs = nowNs;
      out.push_back(makeEvent(LinkEventType::kLinkUp, key, l, l.firstUp, nowNs));
    } else if (l.declared == LinkState::kDegraded) {
      if (nowNs - l.lastGrayNs < params_.degradedClearNs) {
        l.deadlineNs = l.lastGrayNs + params_.degradedClearNs;
        continue;
      }
      l.declared = LinkState::kUp;
      l.lastChangeNs = nowNs;
      LinkSignal cleared;
      cleared.kind = RECCL_LINK_KIND_NONE;
      cleared.source = RECCL_LINK_SRC_NONE;
      cleared.tsNs = l.lastGrayNs + params_.degradedClearNs;
      out.push_back(makeEvent(LinkEventType::kLinkUp, key, l, cleared, nowNs));
    }
  }
}

std::optional<uint64_t> LinkStateMachine::nextDeadlineNs() const {
  std::optional<uint64_t> next;
  for (const auto& [key, l] : links_)
    if (l.deadlineNs && (!next || l.deadlineNs < *next)) next = l.deadlineNs;
  return next;
}

std::optional<LinkStatus> LinkStateMachine::status(LinkKey key, uint64_t nowNs) const {
  auto it = links_.find(key);
  if (it == links_.end()) return std::nullopt;
  const Link& l = it->second;
  LinkStatus st;
  st.link = key;
  st.ifname = l.ifname;
  st.state = l.declared;
  st.physicalUp = l.physUp;
  st.suppressed = l.suppressed;
  st.penalty = penaltyNow(l, nowNs);
  st.flaps = l.flaps;
  st.debounced = l.debounced;
  st.lastChangeNs = l.lastChangeNs;
  return st;
}

std::vector<LinkStatus> LinkStateMachine::statusAll(uint64_t nowNs) const {
  std::vector<LinkStatus> all;
  for (const auto& [key, l] : links_) all.push_back(*status(key, nowNs));
  return all;
}

}  // namespace reccl::detector
