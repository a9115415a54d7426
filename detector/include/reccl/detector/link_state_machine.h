// Turns raw link signals from every source into the few events a failover layer acts on:
// LinkDown on the first down signal (duplicates from other sources debounced), LinkUp only
// after the link stayed up for the hold-down time and its flap penalty decayed below the reuse
// threshold, LinkDegraded for gray failures. Pure logic: time comes in as arguments.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "reccl/detector/link_signal.h"

namespace reccl::detector {

// Flap damping as routers do it for route flaps: every flap adds a penalty that halves every
// half-life; above the suppress threshold a link may not come back until the penalty decays
// below the reuse threshold.
struct DampingParams {
  double penaltyPerFlap = 1000;
  double suppressThreshold = 3000;
  double reuseThreshold = 1000;
  uint64_t halfLifeNs = 5'000'000'000ull;
  double maxPenalty = 12000;
};

struct StateMachineParams {
  uint64_t holdDownNs = 1'000'000'000ull;     // up this long before LinkUp
  uint64_t degradedClearNs = 5'000'000'000ull; // no gray signal this long: degraded -> up
  DampingParams damping;
};

enum class LinkState { kUp, kDown, kDegraded };
enum class LinkEventType { kLinkDown, kLinkUp, kLinkDegraded };

const char* linkStateName(LinkState s) noexcept;
const char* linkEventTypeName(LinkEventType t) noexcept;

// What subscribers receive. Carries the FIRST signal's timestamp and source, so a consumer
// can tell how early the kernel knew.
struct LinkEvent {
  LinkEventType type = LinkEventType::kLinkDown;
  LinkKey link;
  std::string ifname;
  std::string netns;  // the watch's namespace name or path ("" = own namespace)
  uint32_t slot = RECCL_LINK_NO_SLOT;
  LinkKind kind = RECCL_LINK_KIND_NONE;
  LinkSource source = RECCL_LINK_SRC_NONE;
  uint64_t signalNs = 0;  // first signal's CLOCK_MONOTONIC timestamp
  uint64_t emitNs = 0;    // when the state machine decided
  double penalty = 0;
  uint64_t flaps = 0;
};

struct LinkStatus {
  LinkKey link;
  std::string ifname;
  LinkState state = LinkState::kUp;
  bool physicalUp = true;
  bool suppressed = false;
  double penalty = 0;
  uint64_t flaps = 0;
  uint64_t debounced = 0;
  uint64_t lastChangeNs = 0;
};

struct StateMachineCounters {
  uint64_t signals = 0;
  uint64_t debounced = 0;  // duplicates of a state already known
  uint64_t stale = 0;      // older than what another source already reported
  uint64_t unknownLink = 0;
  uint64_t suppressedUps = 0;  // hold-down ended but damping kept the link down
};

class LinkStateMachine {
 public:
  explicit LinkStateMachine(StateMachineParams params) : params_(params) {}

  // Starts tracking a link in the given physical state (declared state follows it).
  void addLink(LinkKey key, std::string ifname, bool physicallyUp, uint64_t nowNs);
  void removeLink(LinkKey key);
  bool hasLink(LinkKey key) const { return links_.count(key) != 0; }
  // The link's physical state as the signals left it (an up period, hold-down included); false
  // for an unknown link.
  bool physicallyUp(LinkKey key) const {
    auto it = links_.find(key);
    return it != links_.end() && it->second.physUp;
  }

  void onSignal(const LinkSignal& s, uint64_t nowNs, std::vector<LinkEvent>& out);
  // Fires due timers (hold-down end, damping reuse, degraded clear).
  void onTick(uint64_t nowNs, std::vector<LinkEvent>& out);
  // Earliest time onTick has work; empty when no timer is armed.
  std::optional<uint64_t> nextDeadlineNs() const;

  std::optional<LinkStatus> status(LinkKey key, uint64_t nowNs) const;
  std::vector<LinkStatus> statusAll(uint64_t nowNs) const;
  const StateMachineCounters& counters() const { return counters_; }
  const StateMachineParams& params() const { return params_; }

  // penalty * 2^(-dt / halfLife); exposed for tests and for the time-until-reuse computation.
  static double decayed(double penalty, uint64_t dtNs, uint64_t halfLifeNs) noexcept;
  // Time for `penalty` to decay to `target` (0 when already below).
  static uint64_t timeToDecayNs(double penalty, double target, uint64_t halfLifeNs) noexcept;

 private:
  struct Link {
    std::string ifname;
    LinkState declared = LinkState::kUp;
    bool physUp = true;
    uint64_t physUpSinceNs = 0;
    LinkSignal firstUp;        // signal that started the current up period
    double penalty = 0;
    uint64_t penaltyNs = 0;    // time `penalty` refers to
    bool suppressed = false;
    std::optional<uint64_t> lastSeq;
    std::optional<uint32_t> lastDowns;
    uint64_t lastGrayNs = 0;
    uint64_t deadlineNs = 0;   // 0: no timer
    uint64_t flaps = 0;
    uint64_t debounced = 0;
    uint64_t lastChangeNs = 0;
  };

  double penaltyNow(const Link& l, uint64_t nowNs) const;
  void addFlap(Link& l, uint64_t nowNs);
  LinkEvent makeEvent(LinkEventType type, LinkKey key, const Link& l, const LinkSignal& first,
                      uint64_t nowNs) const;

  StateMachineParams params_;
  std::map<LinkKey, Link> links_;
  StateMachineCounters counters_;
};

}  // namespace reccl::detector
