// What a fault acts on: one device in one named network namespace, either the host NIC itself or
// the switch port at the other end of its cable (the veth peer in the fabric namespace).
// Resolution also applies the safety rules, so nothing else needs to repeat them.
#pragma once

#include <string>
#include <string_view>

#include "reccl/common/status.h"

namespace reccl::inject {

enum class Side { kHost, kSwitch };

const char* sideName(Side s) noexcept;  // "host" / "switch"
Result<Side> parseSide(std::string_view text);

// As the user named it.
struct Target {
  std::string netns;  // /run/netns name; empty means the caller's (root) namespace
  std::string dev;
  Side side = Side::kHost;

  std::string toString() const;  // "tb-h0/rail0 (switch side)"
};

// The device a fault is really applied to, after --side switch was followed to the peer.
struct ResolvedTarget {
  std::string netns;
  std::string dev;
  std::string kind;  // IFLA_INFO_KIND: "veth", "tun", "bridge", ...
  int ifindex = 0;

  std::string toString() const;  // "tb-fab/h0r0"
  bool operator==(const ResolvedTarget& o) const { return netns == o.netns && dev == o.dev; }
};

// The management NIC of every testbed host; faults on it would cut the job's control plane.
inline constexpr std::string_view kManagementDev = "mgmt0";

// Checks that the name is a plausible namespace / device name (no '/', not too long). Pure.
Status checkNetnsName(std::string_view netns);
Status checkDevName(std::string_view dev);

// Resolves and checks a target: the namespace and device exist (kNotFound otherwise), the device
// (or, for --side switch, its veth peer) is found, and neither the management NIC nor anything in
// the root namespace is touched unless `force` (kPermission otherwise). Changes nothing.
Result<ResolvedTarget> resolveTarget(const Target& target, bool force);

// True when the named namespace is the init process's network namespace (an empty name is).
Result<bool> isRootNetns(std::string_view netns);

}  // namespace reccl::inject
