#include "reccl/inject/fault_session.h"

#include <net/if.h>

#include "reccl/common/log.h"
#include "reccl/inject/lab_cable.h"
#include "reccl/netlink/netns.h"

namespace reccl::inject {

namespace {

bool isLinkAction(ActionKind k) {
  return k == ActionKind::kLinkDown || k == ActionKind::kLinkUp;
}
bool isCarrierAction(ActionKind k) {
  return k == ActionKind::kCarrierOff || k == ActionKind::kCarrierOn;
}
bool isDropAction(ActionKind k) { return k == ActionKind::kDrop || k == ActionKind::kBlackhole; }

void keepFirst(Status& first, Status st) {
  if (!st.ok()) {
    RECCL_WARN(kLogInject, "restore: %s", st.ToString().c_str());
    if (first.ok()) first = std::move(st);
  }
}

// The switch port on the other end of a host NIC's cable, when it is a veth with a named peer
// namespace; nullopt for taps and devices without a peer.
Result<std::optional<ResolvedTarget>> cablePeer(const Target& host, const ResolvedTarget& r,
                                                bool force) {
  if (host.side != Side::kHost || r.kind != "veth") return std::optional<ResolvedTarget>{};
  Target sw = host;
  sw.side = Side::kSwitch;
  auto peer = resolveTarget(sw, force);
  if (peer) return std::optional<ResolvedTarget>(*peer);
  if (peer.status().code() == Errc::kPermission) return peer.status();
  return std::optional<ResolvedTarget>{};
}

}  // namespace

std::string FaultSession::key(const Target& t) {
  return t.netns + "\n" + t.dev + "\n" + sideName(t.side);
}

FaultSession::~FaultSession() {
  if (!restored_ && (!linkSnaps_.empty() || !dropSnaps_.empty())) (void)restore();
}

Result<ResolvedTarget> FaultSession::resolved(const Target& target) const {
  auto it = resolved_.find(key(target));
  if (it == resolved_.end()) return Status{Errc::kInternal, "target " + target.toString() + " was not prepared"};
  return it->second;
}

Status FaultSession::prepare(const std::vector<PlanAction>& actions) {
  // Phase 1: resolve and check everything; no change yet.
  for (const auto& a : actions) {
    std::string k = key(a.target);
    if (!resolved_.count(k)) {
      auto r = resolveTarget(a.target, force_);
      if (!r) return r.status();
      resolved_.emplace(k, *r);
    }
    const ResolvedTarget& r = resolved_[k];
    if (isCarrierAction(a.kind)) RECCL_TRY(carrierControl(r).status());
    if (a.kind == ActionKind::kClear && !clearPeers_.count(key(r))) {
      RECCL_ASSIGN_OR_RETURN(auto peer, cablePeer(a.target, r, force_));
      if (peer) clearPeers_.emplace(key(r), *peer);
    }
  }
  // Phase 2: snapshot, then attach the drop program where drops will happen.
  for (const auto& a : actions) {
    const ResolvedTarget& r = resolved_[key(a.target)];
    if (isLinkAction(a.kind)) RECCL_TRY(snapshotLink(r, true, false));
    if (isCarrierAction(a.kind)) {
      RECCL_TRY(snapshotLink(r, false, true));
      // Before T0: a queue attached or closed at an action would announce the new carrier over
      // rtnetlink at once, which a physical NIC's driver does not.
      if (holdTapQueues_) RECCL_TRY(links_.holdCarrier(r));
    }
    if (isDropAction(a.kind)) RECCL_TRY(snapshotDrop(r));
    if (a.kind == ActionKind::kClear) {
      RECCL_TRY(snapshotLink(r, true, carrierControl(r).ok()));
      RECCL_TRY(snapshotDrop(r));
      auto peer = clearPeers_.find(key(r));
      if (peer != clearPeers_.end()) {
        RECCL_TRY(snapshotLink(peer->second, true, false));
        RECCL_TRY(snapshotDrop(peer->second));
      }
    }
  }
  for (const auto& a : actions) {
    if (!isDropAction(a.kind)) continue;
    RECCL_TRY(dropDevice(resolved_[key(a.target)]).status());
  }
  return {};
}

Status FaultSession::snapshotLink(const ResolvedTarget& t, bool admin, bool carrier) {
  auto it = linkSnaps_.find(key(t));
  if (it == linkSnaps_.end()) {
    RECCL_ASSIGN_OR_RETURN(auto info, links_.query(t));
    LinkSnapshot s;
    s.target = t;
    s.adminUp = info.adminUp();
    s.carrier = info.carrier;
    it = linkSnaps_.emplace(key(t), s).first;
    order_.push_back("L" + key(t));
  }
  it->second.touchedAdmin |= admin;
  it->second.touchedCarrier |= carrier;
  return {};
}

Status FaultSession::snapshotDrop(const ResolvedTarget& t) {
  if (dropSnaps_.count(key(t))) return {};
  DropSnapshot s;
  s.target = t;
  if (faultDropPinned(t.netns, t.dev)) {
    auto dev = FaultDropDevice::open(t);
    if (dev) {
      s.wasAttached = true;
      for (int i = 0; i < RECCL_FAULT_DROP_MAX_RULES; ++i) {
        RECCL_ASSIGN_OR_RETURN(s.rules[i], dev->readSlot(i));
      }
      s.device.emplace(std::move(*dev));
    }
  }
  dropSnaps_.emplace(key(t), std::move(s));
  order_.push_back("D" + key(t));
  return {};
}

Result<FaultDropDevice*> FaultSession::dropDevice(const ResolvedTarget& t) {
  auto it = dropSnaps_.find(key(t));
  if (it == dropSnaps_.end()) return Status{Errc::kInternal, "drop target " + t.toString() + " was not prepared"};
  if (!it->second.device) {
    RECCL_ASSIGN_OR_RETURN(auto dev, FaultDropDevice::openOrAttach(t));
    it->second.device.emplace(std::move(dev));
  }
  return &*it->second.device;
}

Status FaultSession::clearCable(const ResolvedTarget& host, const std::optional<ResolvedTarget>& peer) {
  Status first;
  for (const ResolvedTarget* t : {&host, peer ? &*peer : nullptr}) {
    if (!t) continue;
    auto it = dropSnaps_.find(key(*t));
    if (it != dropSnaps_.end()) it->second.device.reset();
    keepFirst(first, detachFaultDrop(t->netns, t->dev));
    keepFirst(first, links_.setAdminUp(*t, true));
    auto ls = linkSnaps_.find(key(*t));
    if (ls != linkSnaps_.end()) ls->second.downCount = ls->second.carrierOffCount = 0;
    if (carrierControl(*t).ok()) keepFirst(first, links_.setCarrier(*t, true));
  }
  return first;
}

Result<AppliedFault> FaultSession::apply(const PlanAction& action) {
  RECCL_ASSIGN_OR_RETURN(ResolvedTarget t, resolved(action.target));
  AppliedFault f;
  f.kind = action.kind;
  f.resolved = t;
  auto snap = linkSnaps_.find(key(t));
  switch (action.kind) {
    case ActionKind::kLinkDown:
    case ActionKind::kLinkUp: {
      bool up = action.kind == ActionKind::kLinkUp;
      RECCL_TRY(links_.setAdminUp(t, up));
      if (snap != linkSnaps_.end()) snap->second.downCount = up ? 0 : snap->second.downCount + 1;
      break;
    }
    case ActionKind::kCarrierOff:
    case ActionKind::kCarrierOn: {
      bool on = action.kind == ActionKind::kCarrierOn;
      RECCL_TRY(links_.setCarrier(t, on));
      if (snap != linkSnaps_.end())
        snap->second.carrierOffCount = on ? 0 : snap->second.carrierOffCount + 1;
      break;
    }
    case ActionKind::kDrop:
    case ActionKind::kBlackhole: {
      RECCL_ASSIGN_OR_RETURN(FaultDropDevice * dev, dropDevice(t));
      RECCL_ASSIGN_OR_RETURN(reccl_fault_rule rule, toBpfRule(action.drop));
      RECCL_ASSIGN_OR_RETURN(f.slot, dev->findSlotFor(action.drop));
      RECCL_ASSIGN_OR_RETURN(f.previousRule, dev->readSlot(f.slot));
      RECCL_TRY(dev->writeSlot(f.slot, rule));
      break;
    }
    case ActionKind::kClear: {
      auto peer = clearPeers_.find(key(t));
      RECCL_TRY(clearCable(t, peer == clearPeers_.end() ? std::nullopt
                                                         : std::optional<ResolvedTarget>(peer->second)));
      break;
    }
  }
  return f;
}

Status FaultSession::undo(const AppliedFault& f) {
  auto snap = linkSnaps_.find(key(f.resolved));
  switch (f.kind) {
    case ActionKind::kLinkDown:
      if (snap != linkSnaps_.end() && --snap->second.downCount > 0) return {};
      if (snap != linkSnaps_.end()) snap->second.downCount = 0;
      return links_.setAdminUp(f.resolved, true);
    case ActionKind::kCarrierOff:
      if (snap != linkSnaps_.end() && --snap->second.carrierOffCount > 0) return {};
      if (snap != linkSnaps_.end()) snap->second.carrierOffCount = 0;
      return links_.setCarrier(f.resolved, true);
    case ActionKind::kDrop:
    case ActionKind::kBlackhole: {
      RECCL_ASSIGN_OR_RETURN(FaultDropDevice * dev, dropDevice(f.resolved));
      return dev->writeSlot(f.slot, f.previousRule);
    }
    default:
      return {};
  }
}

Status FaultSession::restore() {
  restored_ = true;
  Status first;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    std::string k = it->substr(1);
    if ((*it)[0] == 'L') {
      LinkSnapshot& s = linkSnaps_[k];
      if (!s.target.netns.empty() && !netlink::netnsExists(s.target.netns)) continue;
      if (s.touchedCarrier) keepFirst(first, links_.setCarrier(s.target, s.carrier));
      if (s.touchedAdmin) keepFirst(first, links_.setAdminUp(s.target, s.adminUp));
      s.downCount = s.carrierOffCount = 0;
    } else {
      DropSnapshot& s = dropSnaps_[k];
      if (!s.wasAttached) {
        if (s.device || faultDropPinned(s.target.netns, s.target.dev)) {
          s.device.reset();
          keepFirst(first, detachFaultDrop(s.target.netns, s.target.dev));
        }
        continue;
      }
      auto dev = dropDevice(s.target);
      if (!dev) {
        keepFirst(first, dev.status());
        continue;
      }
      for (int i = 0; i < RECCL_FAULT_DROP_MAX_RULES; ++i)
        keepFirst(first, (*dev)->writeSlot(i, s.rules[i]));
    }
  }
  return first;
}

Status injectLinkAdmin(const Target& target, bool up, bool force) {
  RECCL_ASSIGN_OR_RETURN(ResolvedTarget t, resolveTarget(target, force));
  LinkControl lc;
  return lc.setAdminUp(t, up);
}

Status injectCarrier(const Target& target, bool on, bool force) {
  if (target.side != Side::kHost)
    return {Errc::kInvalidArgument, "carrier-off/on act on the host nic (a tap or a lab VM's nic); name the switch port's namespace and device instead of --side switch"};
  RECCL_ASSIGN_OR_RETURN(ResolvedTarget t, resolveTarget(target, force));
  LinkControl lc;
  return lc.setCarrier(t, on);
}

Result<int> injectDrop(const Target& target, const DropRule& rule, bool force) {
  RECCL_TRY(toBpfRule(rule).status());
  RECCL_ASSIGN_OR_RETURN(ResolvedTarget t, resolveTarget(target, force));
  RECCL_ASSIGN_OR_RETURN(auto dev, FaultDropDevice::openOrAttach(t));
  return dev.upsertRule(rule);
}

Status clearTarget(const Target& target, bool force) {
  Target host = target;
  host.side = Side::kHost;
  // A namespace that is gone (testbed torn down) can leave pins behind; clear removes them.
  if (!host.netns.empty() && checkNetnsName(host.netns).ok() && checkDevName(host.dev).ok() &&
      !netlink::netnsExists(host.netns) && faultDropPinned(host.netns, host.dev))
    return detachFaultDrop(host.netns, host.dev);
  RECCL_ASSIGN_OR_RETURN(ResolvedTarget t, resolveTarget(host, force));
  RECCL_ASSIGN_OR_RETURN(auto peer, cablePeer(host, t, force));
  Status first;
  LinkControl lc;
  for (const ResolvedTarget* r : {&t, peer ? &*peer : nullptr}) {
    if (!r) continue;
    keepFirst(first, detachFaultDrop(r->netns, r->dev));
    keepFirst(first, lc.setAdminUp(*r, true));
    if (carrierControl(*r).ok()) keepFirst(first, lc.setCarrier(*r, true));
  }
  return first;
}

Result<FaultDropStats> readDropStats(const Target& target, bool force) {
  RECCL_ASSIGN_OR_RETURN(ResolvedTarget t, resolveTarget(target, force));
  if (!faultDropPinned(t.netns, t.dev)) return FaultDropStats{};  // no rules: an empty table, not an error
  RECCL_ASSIGN_OR_RETURN(auto dev, FaultDropDevice::open(t));
  return dev.readStats();
}

}  // namespace reccl::inject
