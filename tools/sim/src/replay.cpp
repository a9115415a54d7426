#include "reccl/sim/replay.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <queue>
#include <set>
#include <unordered_map>
#include <vector>

namespace reccl::sim {

using detector::LinkEvent;
using detector::LinkKind;
using detector::LinkEventType;
using detector::LinkKey;
using detector::LinkSignal;
using detector::LinkStateMachine;
using nlohmann::json;

json RunStats::toJson() const {
  return {{"wall_s", wallS},           {"work_s", workS},         {"link_faults", linkFaults},
          {"ignored_faults", ignoredFaults}, {"ride_throughs", rideThroughs}, {"failovers", failovers},
          {"failbacks", failbacks},    {"link_aborts", linkAborts}, {"other_aborts", otherAborts},
          {"stall_s", stallS},         {"restart_s", restartS},   {"lost_work_s", lostWorkS},
          {"degraded_s", degradedS}};
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr uint64_t kNoTick = std::numeric_limits<uint64_t>::max();

uint64_t toNs(double s) { return uint64_t(std::llround(s * 1e9)); }
uint64_t bit(uint32_t n) { return uint64_t(1) << n; }
uint64_t linkId(uint32_t h, uint32_t n) { return (uint64_t(h) << 8) | n; }
// The k-th down of a flap episode gets its own quantile, spread from the episode's.
double spread(double u, uint32_t k) { return std::fmod(u + k * 0.6180339887498949, 1.0); }

enum class Ev : uint8_t { kDetect, kLinkUp, kTick, kPrune, kFailBack, kFlapDown, kGrayDetect, kGrayEnd, kGrayClear };

struct Pending {
  double at;
  uint64_t seq;  // ties: in the order pushed
  Ev type;
  uint32_t host, nic;
  uint64_t epoch;  // the job incarnation it belongs to (an abort drops the rest)
  uint64_t arg;    // fault index (flap down), tick time (ns)
  uint32_t sub;    // flap: which down
};
struct Later {
  bool operator()(const Pending& a, const Pending& b) const { return a.at != b.at ? a.at > b.at : a.seq > b.seq; }
};

// One host's links as the job sees them (bit k = NIC k).
struct HostState {
  uint64_t down = 0;       // physically down
  uint64_t avoid = 0;      // out of use (failed over from, not failed back yet)
  uint64_t gray = 0;       // losing packets
  uint64_t grayAvoid = 0;  // out of use because of gray loss
  double bw = 1;            // its share of fault-free bandwidth
  bool clean() const { return !(down | avoid | gray | grayAvoid); }
};

// A link with a fault in flight.
struct LinkFault {
  double upAt = 0;      // its current down ends (the latest of overlapping downs)
  double grayUntil = 0;
  double u = 0.5, u2 = 0.5;  // the fault's stall and fail-back quantiles
  double faultAt = 0;
};

class Replay {
 public:
  Replay(const Scenario& s, const PolicyParams* p, FaultSequence& f, Stop stop)
      : s_(s), p_(p), faults_(f), stop_(stop), machine_(p ? p->linkState : detector::StateMachineParams{}) {
    nextCkptAt_ = s.job.checkpointIntervalS;
    if (p_) bwAfter_ = resolvedBwAfter(*p_, s.cluster);
  }

  RunStats run() {
    size_t next = 0;
    const FaultEvent* f = faults_.at(0);
    while (!finished_) {
      double tf = f ? f->atS : kInf;
      double tq = q_.empty() ? kInf : q_.top().at;
      double t = std::min(tf, tq);
      if (stop_.wallS > 0 && t >= stop_.wallS) {
        advanceTo(stop_.wallS);
        break;
      }
      advanceTo(t);
      if (finished_ || t == kInf) break;
      if (tq <= tf) {
        Pending ev = q_.top();
        q_.pop();
        if (ev.epoch == epoch_) handle(ev);
      } else {
        onFault(next, *f);
        f = faults_.at(++next);
      }
    }
    st_.wallS = now_;
    st_.workS = work_;
    return st_;
  }

 private:
  // --- progress -------------------------------------------------------------------------------
  // Checkpoints are due every checkpoint_interval_s of wall time after the previous one ended (or
  // the restart did), and taken as soon as the job runs at or after that moment: a stall leaves
  // less work in the interval instead of moving the checkpoint, so a loss is never rounded to a
  // whole interval.
  void advanceTo(double t) {
    while (now_ < t && !finished_) {
      if (now_ < blockedUntil_) {
        double dt = std::min(t, blockedUntil_) - now_;
        (now_ < restartingUntil_ ? st_.restartS : st_.stallS) += dt;
        now_ += dt;
        continue;
      }
      if (ckptLeft_ > 0) {
        double dt = std::min(t - now_, ckptLeft_);
        now_ += dt;
        ckptLeft_ -= dt;
        if (ckptLeft_ <= 0) endCheckpoint();
        continue;
      }
      if (now_ >= nextCkptAt_) {
        ckptLeft_ = s_.job.checkpointCostS;
        if (ckptLeft_ <= 0) endCheckpoint();
        continue;
      }
      double toEnd = stop_.workS > 0 ? (stop_.workS - work_) / rate_ : kInf;
      double dt = std::min({t - now_, nextCkptAt_ - now_, toEnd});
      if (rate_ < 1) st_.degradedS += dt;
      now_ += dt;
      if (dt == toEnd) {
        work_ = stop_.workS;
        finished_ = true;
      } else {
        work_ += dt * rate_;
      }
    }
  }

  void endCheckpoint() {
    ckptLeft_ = 0;
    ckptWork_ = work_;
    nextCkptAt_ = now_ + s_.job.checkpointIntervalS;
  }

  void block(double until) { blockedUntil_ = std::max(blockedUntil_, until); }

  void abort() {
    st_.lostWorkS += work_ - ckptWork_;
    work_ = ckptWork_;
    ckptLeft_ = 0;
    // The restarted job runs on healthy hosts (spares for the failed ones): no link state carries
    // over, and whatever was still pending belongs to the old incarnation.
    ++epoch_;
    hosts_.clear();
    slow_.clear();
    links_.clear();
    if (p_) machine_ = LinkStateMachine(p_->linkState);
    tickAt_ = kNoTick;
    rate_ = 1;
    blockedUntil_ = restartingUntil_ = now_ + s_.job.restartS;
    nextCkptAt_ = restartingUntil_ + s_.job.checkpointIntervalS;
  }

  uint64_t groupMask(uint32_t nic) const {
    const int n = s_.cluster.nicsPerHost;
    if (p_->scope == Scope::kHost || !s_.cluster.fusedNics) return n >= 64 ? ~uint64_t(0) : bit(uint32_t(n)) - 1;
    const int k = s_.cluster.fusedPorts;
    return (bit(uint32_t(k)) - 1) << (nic / uint32_t(k) * uint32_t(k));
  }

  double hostBandwidth(const HostState& hs) const {
    double bw = 1;
    if (hs.avoid) {
      const double g = groupSize(*p_, s_.cluster);
      const uint32_t groups = p_->scope == Scope::kHost ? 1 : uint32_t(s_.cluster.nicsPerHost / s_.cluster.fusedPorts);
      for (uint32_t i = 0; i < groups; ++i) {
        int k = std::popcount(hs.avoid & groupMask(uint32_t(i * g)));
        if (k > 0) bw = std::min(bw, bwAfter_ * (g - k) / (g - 1));
      }
    }
    if (hs.gray & ~hs.avoid) bw = std::min(bw, s_.faults.grayBandwidth);
    return bw;
  }

  // Host h's state when it has a link not as new, else null.
  HostState* tracked(uint32_t h) {
    auto it = hosts_.find(h);
    return it == hosts_.end() ? nullptr : &it->second;
  }

  // After a change to host h: its bandwidth share, the job's rate (set by the slowest host) and
  // whether the host needs tracking at all. Logarithmic in the hosts in trouble.
  void refresh(uint32_t h) {
    auto it = hosts_.find(h);
    if (it == hosts_.end()) return;
    HostState& hs = it->second;
    const double bw = hostBandwidth(hs);
    if (bw != hs.bw) {
      if (hs.bw < 1) slow_.erase(slow_.find(hs.bw));
      if (bw < 1) slow_.insert(bw);
      hs.bw = bw;
      const double worst = slow_.empty() ? 1.0 : *slow_.begin(), c = s_.job.commShare;
      rate_ = worst >= 1 ? 1.0 : 1.0 / ((1 - c) + c / worst);
    }
    if (hs.clean()) hosts_.erase(it);
  }

  void push(double at, Ev type, uint32_t h, uint32_t n, uint64_t arg = 0, uint32_t sub = 0) {
    q_.push(Pending{at, seq_++, type, h, n, epoch_, arg, sub});
  }

  // --- faults ---------------------------------------------------------------------------------
  void onFault(size_t i, const FaultEvent& e) {
    if (e.kind == FaultKind::kCrash) {
      ++st_.otherAborts;
      abort();
      return;
    }
    if (!p_) return;  // the reference: link faults cost nothing
    switch (e.kind) {
      case FaultKind::kDown:
        down(e.host, e.nic, e.durationS, e.u, e.u2);
        break;
      case FaultKind::kFlap:
        down(e.host, e.nic, e.durationS, e.u, e.u2);
        for (uint32_t k = 1; k < e.count; ++k)
          push(now_ + k * (e.durationS + e.gapS), Ev::kFlapDown, e.host, e.nic, i, k);
        break;
      case FaultKind::kGray:
        gray(e.host, e.nic, e.durationS, e.u, e.u2);
        break;
      case FaultKind::kCrash:
        break;
    }
  }

  // Counts a link fault; false when the job is restarting (the restart places it on healthy hosts).
  bool meet() {
    ++st_.linkFaults;
    if (now_ >= restartingUntil_) return true;
    ++st_.ignoredFaults;
    return false;
  }

  void down(uint32_t h, uint32_t n, double d, double u, double u2) {
    if (!meet()) return;
    HostState& hs = hosts_[h];
    LinkFault& lf = links_[linkId(h, n)];
    const bool inUse = !(hs.avoid & bit(n));
    hs.down |= bit(n);
    lf.upAt = std::max(lf.upAt, now_ + d);
    push(now_ + d, Ev::kLinkUp, h, n);
    if (inUse) {
      lf.u = u;
      lf.u2 = u2;
      lf.faultAt = now_;
    }
    if (d < p_->detectS) {
      // Back before the policy notices: the transport's retries carry it, the next retry after
      // the link is back moves the traffic again.
      if (inUse) {
        double wait = p_->retryS > 0 ? std::min(std::ceil(d / p_->retryS) * p_->retryS, p_->detectS) : d;
        block(now_ + wait);
        ++st_.rideThroughs;
      }
      return;
    }
    if (inUse) block(now_ + p_->detectS);  // hung until the policy sees it
    push(now_ + p_->detectS, Ev::kDetect, h, n);
  }

  void onDetect(uint32_t h, uint32_t n) {
    HostState* hs = tracked(h);
    if (!hs || !(hs->down & bit(n))) return;
    if (p_->failBack) feed(RECCL_LINK_KIND_CARRIER_DOWN, h, n);
    if (!(hs->avoid & bit(n))) failover(h, n);
  }

  void failover(uint32_t h, uint32_t n) {
    if (!p_->failover || (p_->scope == Scope::kFused && !s_.cluster.fusedNics)) {
      ++st_.linkAborts;
      abort();
      return;
    }
    HostState& hs = hosts_[h];
    const uint64_t g = groupMask(n), me = bit(n);
    if (!(g & ~hs.avoid & ~me)) {
      // Nothing in use is left: links that came back but were not taken back yet are used again.
      const uint64_t up = g & ~hs.down & ~me;
      if (!up) {
        ++st_.linkAborts;
        abort();
        return;
      }
      hs.avoid &= ~up;
      hs.grayAvoid &= ~up;
    }
    hs.avoid |= me;
    ++st_.failovers;
    const LinkFault& lf = links_[linkId(h, n)];
    block(lf.faultAt + std::max(p_->stallS.quantile(lf.u), p_->detectS));
    refresh(h);
  }

  void onLinkUp(uint32_t h, uint32_t n) {
    auto lit = links_.find(linkId(h, n));
    if (lit == links_.end() || now_ < lit->second.upAt) return;  // a later down holds it
    HostState& hs = hosts_[h];
    hs.down &= ~bit(n);
    if (p_->failBack) feed(RECCL_LINK_KIND_CARRIER_UP, h, n);
    if (!(hs.avoid & bit(n)) && now_ >= lit->second.grayUntil) links_.erase(lit);
    refresh(h);
  }

  // The link may carry traffic again: it does once the new connection is set up.
  void requestFailBack(uint32_t h, uint32_t n) {
    double u2 = 0.5;
    if (auto lit = links_.find(linkId(h, n)); lit != links_.end()) u2 = lit->second.u2;
    double delay = p_->failBackDelayS.quantile(spread(u2, 1));
    if (delay <= 0)
      failBack(h, n);
    else
      push(now_ + delay, Ev::kFailBack, h, n);
  }

  void failBack(uint32_t h, uint32_t n) {
    HostState* found = tracked(h);
    if (!found) return;
    HostState& hs = *found;
    const uint64_t me = bit(n);
    if (!(hs.avoid & me) || (hs.down & me) || (hs.grayAvoid & me)) return;
    hs.avoid &= ~me;
    ++st_.failbacks;
    double u2 = 0.5;
    if (auto lit = links_.find(linkId(h, n)); lit != links_.end()) {
      u2 = lit->second.u2;
      if (now_ >= lit->second.grayUntil) links_.erase(lit);
    }
    block(now_ + p_->failBackStallS.quantile(u2));
    refresh(h);
  }

  // --- the detector's state machine: hold-down and damping before a fail-back -----------------
  void feed(LinkKind kind, uint32_t h, uint32_t n) {
    const LinkKey key{h, n};
    const uint64_t t = toNs(now_);
    if (!machine_.hasLink(key)) machine_.addLink(key, "", true, t);
    LinkSignal sig;
    sig.kind = kind;
    sig.source = RECCL_LINK_SRC_FENTRY_CARRIER;
    sig.tsNs = t;
    sig.link = key;
    std::vector<LinkEvent> out;
    machine_.onSignal(sig, t, out);
    onMachine(out);
  }

  void onMachine(const std::vector<LinkEvent>& events) {
    for (const auto& e : events) {
      if (e.type != LinkEventType::kLinkUp) continue;  // downs: the detection itself acts
      requestFailBack(e.link.netnsIno, e.link.ifindex);
      // Its penalty is forgotten once decayed a thousandfold; then the link leaves the machine.
      push(now_ + 10 * double(p_->linkState.damping.halfLifeNs) / 1e9, Ev::kPrune, e.link.netnsIno, e.link.ifindex);
    }
    auto d = machine_.nextDeadlineNs();
    if (d && *d != tickAt_) {
      tickAt_ = *d;
      push(double(*d) / 1e9, Ev::kTick, 0, 0, *d);
    }
  }

  void onTick(uint64_t tickNs) {
    if (tickNs == tickAt_) tickAt_ = kNoTick;
    std::vector<LinkEvent> out;
    machine_.onTick(std::max(toNs(now_), tickNs), out);
    onMachine(out);
  }

  void onPrune(uint32_t h, uint32_t n) {
    const LinkKey key{h, n};
    auto st = machine_.status(key, toNs(now_));
    if (st && st->state == detector::LinkState::kUp && st->physicalUp && st->penalty < 1) machine_.removeLink(key);
  }

  // --- gray loss ------------------------------------------------------------------------------
  void gray(uint32_t h, uint32_t n, double d, double u, double u2) {
    if (!meet()) return;
    HostState& hs = hosts_[h];
    LinkFault& lf = links_[linkId(h, n)];
    hs.gray |= bit(n);
    lf.grayUntil = std::max(lf.grayUntil, now_ + d);
    lf.u = u;
    lf.u2 = u2;
    push(now_ + d, Ev::kGrayEnd, h, n);
    if (p_->grayDetectS && !(hs.avoid & bit(n))) push(now_ + *p_->grayDetectS, Ev::kGrayDetect, h, n);
    refresh(h);
  }

  void onGrayDetect(uint32_t h, uint32_t n) {
    const uint64_t me = bit(n);
    HostState* hs = tracked(h);
    // A gray link still carries bytes: moved off only when a healthy one is in use to take them.
    if (!hs || !(hs->gray & me) || (hs->avoid & me) || !(groupMask(n) & ~hs->avoid & ~hs->down & ~hs->gray & ~me))
      return;
    hs->avoid |= me;
    hs->grayAvoid |= me;
    ++st_.failovers;
    block(now_ + p_->stallS.quantile(links_[linkId(h, n)].u));
    refresh(h);
  }

  void onGrayEnd(uint32_t h, uint32_t n) {
    auto lit = links_.find(linkId(h, n));
    if (lit == links_.end() || now_ < lit->second.grayUntil) return;
    HostState& hs = hosts_[h];
    hs.gray &= ~bit(n);
    if ((hs.grayAvoid & bit(n)) && p_->failBack) push(now_ + p_->grayClearS, Ev::kGrayClear, h, n);
    if (!(hs.avoid & bit(n)) && !(hs.down & bit(n))) links_.erase(lit);
    refresh(h);
  }

  void onGrayClear(uint32_t h, uint32_t n) {
    const uint64_t me = bit(n);
    HostState* hs = tracked(h);
    if (!hs || !(hs->grayAvoid & me) || (hs->gray & me)) return;
    hs->grayAvoid &= ~me;
    if (hs->down & me) return;  // down meanwhile: the down's own fail-back brings it back
    requestFailBack(h, n);
  }

  void handle(const Pending& ev) {
    switch (ev.type) {
      case Ev::kDetect: onDetect(ev.host, ev.nic); break;
      case Ev::kLinkUp: onLinkUp(ev.host, ev.nic); break;
      case Ev::kTick: onTick(ev.arg); break;
      case Ev::kPrune: onPrune(ev.host, ev.nic); break;
      case Ev::kFailBack: failBack(ev.host, ev.nic); break;
      case Ev::kFlapDown: {
        const FaultEvent* e = faults_.at(size_t(ev.arg));
        down(ev.host, ev.nic, e->durationS, spread(e->u, ev.sub), spread(e->u2, ev.sub));
        break;
      }
      case Ev::kGrayDetect: onGrayDetect(ev.host, ev.nic); break;
      case Ev::kGrayEnd: onGrayEnd(ev.host, ev.nic); break;
      case Ev::kGrayClear: onGrayClear(ev.host, ev.nic); break;
    }
  }

  const Scenario& s_;
  const PolicyParams* p_;
  FaultSequence& faults_;
  const Stop stop_;
  LinkStateMachine machine_;
  RunStats st_;
  std::priority_queue<Pending, std::vector<Pending>, Later> q_;
  uint64_t seq_ = 0, epoch_ = 0, tickAt_ = kNoTick;
  std::unordered_map<uint32_t, HostState> hosts_;  // hosts with a link not as new
  std::multiset<double> slow_;                     // bandwidth shares below 1, one per host
  std::unordered_map<uint64_t, LinkFault> links_;
  double now_ = 0, blockedUntil_ = 0, restartingUntil_ = 0;
  double work_ = 0, ckptWork_ = 0, nextCkptAt_ = 0, ckptLeft_ = 0;
  double rate_ = 1, bwAfter_ = 1;
  bool finished_ = false;
};

}  // namespace

RunStats replay(const Scenario& s, const PolicyParams* policy, FaultSequence& faults, Stop stop) {
  return Replay(s, policy, faults, stop).run();
}

}  // namespace reccl::sim
