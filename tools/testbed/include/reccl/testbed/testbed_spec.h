// What a testbed is made of, and the checks every entry point (CLI, fixture, library) applies.
#pragma once

#include <string>
#include <string_view>

#include "reccl/common/status.h"

namespace reccl::testbed {

enum class NicKind { kVeth, kTap };

const char* nicKindName(NicKind k) noexcept;  // "veth" / "tap"
Result<NicKind> parseNicKind(std::string_view s);

inline constexpr int kMaxHosts = 64;
inline constexpr int kMaxRails = 8;
inline constexpr size_t kMaxNameLen = 12;  // "<name>-h63" and "h63r7" stay short and readable
inline constexpr int kDefaultMtu = 9000;
// The tap forwarder (tap_forwarder.h) is the taps' cable and switch. At SCHED_FIFO (1-99) it
// moves a frame as soon as one is there instead of waiting for a CPU behind the ranks, but it
// then takes the CPUs from the ranks' own threads whenever frames flow, and those threads are
// the rest of a failover's path: normal scheduling (0) by default (docs/testbed.md).
inline constexpr int kDefaultWirePrio = 0;
inline constexpr int kMaxWirePrio = 99;

struct TestbedSpec {
  std::string name;
  int hosts = 2;
  int rails = 2;
  NicKind nic = NicKind::kVeth;
  int mtu = kDefaultMtu;
  int wirePrio = kDefaultWirePrio;  // tap NICs: the forwarder's SCHED_FIFO priority, 0 normal
};

// [a-z0-9][a-z0-9-]*, at most 12 characters. kInvalidArgument naming the argument otherwise.
Status validateTestbedName(std::string_view name);
// Name, hosts in [1,64], rails in [1,8], mtu in [68, 65535], wire priority in [0, 99] and only
// with tap NICs.
Status validateSpec(const TestbedSpec& spec);

}  // namespace reccl::testbed
