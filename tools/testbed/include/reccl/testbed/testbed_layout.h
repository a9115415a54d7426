// The deterministic names and addresses of a testbed (documented in docs/testbed.md):
//   host i       netns <name>-h<i> with mgmt0 and rail0..rail<R-1>
//   fabric       netns <name>-fab with bridges `mgmt` and `rail<k>`
//   switch ports h<i>m (mgmt) and h<i>r<k> (rail k) in the fabric, peers of the host NICs
//   addresses    mgmt 10.99.0.(i+1)/24, rail k 10.(100+k).0.(i+1)/24
#pragma once

#include <string>
#include <string_view>

namespace reccl::testbed {

std::string hostNetns(std::string_view name, int host);
std::string fabricNetns(std::string_view name);
std::string railDev(int rail);              // "rail<k>" (host NIC and the rail's bridge)
inline constexpr const char* kMgmtDev = "mgmt0";
inline constexpr const char* kMgmtBridge = "mgmt";
std::string switchRailPort(int host, int rail);  // "h<i>r<k>"
std::string switchMgmtPort(int host);            // "h<i>m"
std::string mgmtAddress(int host);               // "10.99.0.(i+1)"
std::string railAddress(int host, int rail);     // "10.(100+k).0.(i+1)"
inline constexpr int kPrefixLen = 24;

// Parses "<name>-h<i>" back to i when it belongs to `name`; -1 otherwise.
int hostIndexOfNetns(std::string_view name, std::string_view netns);
// True for "<name>-fab" and "<name>-h<i>": the namespace names testbed `name` uses.
bool isTestbedNetns(std::string_view name, std::string_view netns);

}  // namespace reccl::testbed
