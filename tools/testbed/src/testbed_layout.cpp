#include "reccl/testbed/testbed_layout.h"

#include <charconv>
#include <string>

namespace reccl::testbed {

std::string hostNetns(std::string_view name, int host) {
  return std::string(name) + "-h" + std::to_string(host);
}
std::string fabricNetns(std::string_view name) { return std::string(name) + "-fab"; }
std::string railDev(int rail) { return "rail" + std::to_string(rail); }
std::string switchRailPort(int host, int rail) {
  return "h" + std::to_string(host) + "r" + std::to_string(rail);
}
std::string switchMgmtPort(int host) { return "h" + std::to_string(host) + "m"; }
std::string mgmtAddress(int host) { return "10.99.0." + std::to_string(host + 1); }
std::string railAddress(int host, int rail) {
  return "10." + std::to_string(100 + rail) + ".0." + std::to_string(host + 1);
}

int hostIndexOfNetns(std::string_view name, std::string_view netns) {
  if (netns.size() <= name.size() + 2 || netns.substr(0, name.size()) != name) return -1;
  std::string_view rest = netns.substr(name.size());
  if (rest.substr(0, 2) != "-h") return -1;
  rest.remove_prefix(2);
  if (rest.empty() || (rest.size() > 1 && rest[0] == '0')) return -1;
  int v = -1;
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (ec != std::errc() || ptr != rest.data() + rest.size()) return -1;
  return v;
}

bool isTestbedNetns(std::string_view name, std::string_view netns) {
  return netns == fabricNetns(name) || hostIndexOfNetns(name, netns) >= 0;
}

}  // namespace reccl::testbed
