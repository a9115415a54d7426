// The pure half of target.h: names and their checks, no system calls (the plan parser uses it).
#include <net/if.h>

#include "reccl/inject/quoted.h"
#include "reccl/inject/target.h"

namespace reccl::inject {

const char* sideName(Side s) noexcept { return s == Side::kSwitch ? "switch" : "host"; }

Result<Side> parseSide(std::string_view text) {
  if (text == "host") return Side::kHost;
  if (text == "switch") return Side::kSwitch;
  return Status{Errc::kInvalidArgument, "side must be host or switch, not " + quoteInput(std::string(text))};
}

std::string Target::toString() const {
  std::string s = (netns.empty() ? std::string("(root netns)") : netns) + "/" + dev;
  if (side == Side::kSwitch) s += " (switch side)";
  return s;
}

std::string ResolvedTarget::toString() const {
  return (netns.empty() ? std::string("(root netns)") : netns) + "/" + dev;
}

Status checkNetnsName(std::string_view netns) {
  bool control = false;
  for (char c : netns) control = control || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  if (netns.size() > 200 || control || netns.find('/') != std::string_view::npos ||
      netns == "." || netns == "..")
    return {Errc::kInvalidArgument, "netns " + quoteInput(std::string(netns)) + " is not a namespace name"};
  return {};
}

Status checkDevName(std::string_view dev) {
  if (dev.empty()) return {Errc::kInvalidArgument, "dev must not be empty"};
  bool control = false;
  for (char c : dev) control = control || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  if (dev.size() >= IFNAMSIZ || control || dev.find('/') != std::string_view::npos ||
      dev.find_first_of(" \t\n\r\v\f:") != std::string_view::npos)
    return {Errc::kInvalidArgument, "dev " + quoteInput(std::string(dev)) + " is not a device name"};
  return {};
}

}  // namespace reccl::inject
