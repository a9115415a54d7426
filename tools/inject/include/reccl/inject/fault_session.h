// Applies faults and remembers how to take them back. A session snapshots every device it will
// touch before the first fault (admin state, carrier, the drop rule table), undoes single actions
// on request (the `duration_ms` of a plan entry), and restore() puts every device back the way
// the snapshot found it. The destructor restores too, so an early return leaves no fault behind.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/inject/fault_drop.h"
#include "reccl/inject/fault_plan.h"
#include "reccl/inject/link_control.h"
#include "reccl/inject/target.h"

namespace reccl::inject {

// What apply() did, so that undo() can take exactly that back.
struct AppliedFault {
  ActionKind kind = ActionKind::kLinkDown;
  ResolvedTarget resolved;
  int slot = -1;                    // drop / blackhole: the rule slot written
  reccl_fault_rule previousRule{};  // ... and what it held before
};

class FaultSession {
 public:
  // holdTapQueues: prepare() attaches and keeps a queue of every tap whose carrier the actions
  // change (LinkControl::holdCarrier), so no queue's attach or close announces a carrier change.
  explicit FaultSession(bool force, bool holdTapQueues = false) : force_(force), holdTapQueues_(holdTapQueues) {}
  FaultSession(const FaultSession&) = delete;
  FaultSession& operator=(const FaultSession&) = delete;
  ~FaultSession();

  // Resolves every target of the plan and checks each action fits its device (carrier actions
  // need a tap or a lab VM's NIC, lab_cable.h); on error nothing has been changed. Then
  // snapshots the devices and attaches the drop program (with an empty rule table) to every drop
  // target, so that a scheduled drop is a single map write.
  Status prepare(const std::vector<PlanAction>& actions);

  Result<AppliedFault> apply(const PlanAction& action);
  Status undo(const AppliedFault& fault);
  // Puts every snapshotted device back; idempotent. Returns the first error but tries them all.
  Status restore();

  // The resolved device of a prepared target.
  Result<ResolvedTarget> resolved(const Target& target) const;

 private:
  struct LinkSnapshot {
    ResolvedTarget target;
    bool adminUp = true;
    bool carrier = true;
    bool touchedAdmin = false;
    bool touchedCarrier = false;
    int downCount = 0;  // nested link-down with durations: up again only when all expired
    int carrierOffCount = 0;
  };
  struct DropSnapshot {
    ResolvedTarget target;
    bool wasAttached = false;
    reccl_fault_rule rules[RECCL_FAULT_DROP_MAX_RULES]{};
    std::optional<FaultDropDevice> device;
  };

  static std::string key(const ResolvedTarget& t) { return t.netns + "\n" + t.dev; }
  static std::string key(const Target& t);
  Status snapshotLink(const ResolvedTarget& t, bool admin, bool carrier);
  Status snapshotDrop(const ResolvedTarget& t);
  Status clearCable(const ResolvedTarget& host, const std::optional<ResolvedTarget>& peer);
  Result<FaultDropDevice*> dropDevice(const ResolvedTarget& t);

  bool force_;
  bool holdTapQueues_ = false;
  bool restored_ = false;
  LinkControl links_;
  std::map<std::string, ResolvedTarget> resolved_;       // by Target key
  std::map<std::string, ResolvedTarget> clearPeers_;     // host key -> switch port, for clear
  std::map<std::string, LinkSnapshot> linkSnaps_;        // by ResolvedTarget key
  std::map<std::string, DropSnapshot> dropSnaps_;
  std::vector<std::string> order_;                       // snapshot order, restored in reverse
};

// One-shot operations for the CLI and for tests/benchmarks that inject a single fault. They
// resolve the target under the safety rules first and change nothing when that fails.
Status injectLinkAdmin(const Target& target, bool up, bool force);
Status injectCarrier(const Target& target, bool on, bool force);
// Adds (or updates the rate of) a drop rule; returns its slot.
Result<int> injectDrop(const Target& target, const DropRule& rule, bool force);
// Undoes everything on the cable of the target: drop programs on the NIC and its switch port are
// detached and unpinned, both ends set admin up, a tap's carrier set on (a lab VM's cable plugged).
Status clearTarget(const Target& target, bool force);
// The drop rules on the target and their counters; none (no rules, zero counters) when nothing
// was injected there.
Result<FaultDropStats> readDropStats(const Target& target, bool force);

}  // namespace reccl::inject
