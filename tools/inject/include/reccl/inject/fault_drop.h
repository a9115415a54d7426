// Attaches bpf/fault_drop.bpf.c to a device's clsact hooks inside the device's namespace, pins
// its programs and maps under /sys/fs/bpf/reccl/inject/<netns>/<dev>/ so that a later process
// (`reccl inject stats`, `reccl inject clear`) finds them, and edits its rule table live.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "reccl/inject/drop_rule.h"
#include "reccl/inject/target.h"
#include "reccl_bpf/fault_drop.h"

namespace reccl::inject {

inline constexpr const char* kBpffsRoot = "/sys/fs/bpf";
inline constexpr const char* kPinRoot = "/sys/fs/bpf/reccl/inject";
// tc filter identity of our program on both hooks; priority 1 so it runs before other filters
// (a gray failure drops a packet before anything on the host sees it).
inline constexpr uint32_t kTcHandle = 0xfa17;
inline constexpr uint32_t kTcPriority = 1;

// "/sys/fs/bpf/reccl/inject/<netns or _root>/<dev>".
std::string faultDropPinDir(const std::string& netns, const std::string& dev);

struct FaultDropRuleStats {
  int slot = 0;
  DropRule rule;
  reccl_fault_stats counters{};
};

struct FaultDropStats {
  std::vector<FaultDropRuleStats> rules;  // enabled slots only
  reccl_fault_stats ingressAll{};         // every packet the ingress program saw
  reccl_fault_stats egressAll{};
};

// Open handles on the pinned maps of one attached device. Map updates are plain bpf syscalls, so
// a rule change takes effect on the next packet without reloading anything.
class FaultDropDevice {
 public:
  // The device's pinned maps; kNotFound when the program is not attached there.
  static Result<FaultDropDevice> open(const ResolvedTarget& target);
  // As open(), but loads, attaches and pins the program first when it is not attached (or its
  // pins are stale because the device was re-created).
  static Result<FaultDropDevice> openOrAttach(const ResolvedTarget& target);

  // Writes the rule into the slot that has the same direction and flow, else the first free
  // slot; returns the slot. kExists when the table is full.
  Result<int> upsertRule(const DropRule& rule);
  // The slot upsertRule would write: the one with the same match, else the first free one.
  Result<int> findSlotFor(const DropRule& rule) const;
  Result<reccl_fault_rule> readSlot(int slot) const;
  Status writeSlot(int slot, const reccl_fault_rule& rule);
  Status clearSlot(int slot) { return writeSlot(slot, reccl_fault_rule{}); }
  Result<bool> anyRuleEnabled() const;
  Result<FaultDropStats> readStats() const;

  const ResolvedTarget& target() const noexcept { return target_; }

 private:
  FaultDropDevice() = default;
  Result<reccl_fault_stats> readCounters(uint32_t key) const;

  ResolvedTarget target_;
  UniqueFd rules_;
  UniqueFd stats_;
};

// Removes the tc filters (and the clsact qdisc when the injector created it) and the pins. Ok
// when nothing is attached; when the namespace or device is gone only the pins are removed.
Status detachFaultDrop(const std::string& netns, const std::string& dev);
// detachFaultDrop for every device with pins under the namespace (a testbed's `down` takes its
// hosts' pins along this way); returns those devices. Ok with none.
Result<std::vector<std::string>> detachFaultDropNetns(const std::string& netns);
// Namespaces that have pins (the root namespace's "_root" left out).
std::vector<std::string> faultDropPinnedNetns();
// True when pins for the device exist.
bool faultDropPinned(const std::string& netns, const std::string& dev);
// True when a tc filter with our handle/priority is on the device's ingress or egress hook.
Result<bool> faultDropFilterPresent(const std::string& netns, const std::string& dev);

}  // namespace reccl::inject
