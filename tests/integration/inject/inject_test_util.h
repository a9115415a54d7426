// Small helpers shared by the injection integration tests.
#pragma once

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "reccl/inject/fault_drop.h"
#include "reccl/netlink/link.h"
#include "reccl/netlink/nl_socket.h"
#include "reccl/testbed/child_process.h"

namespace reccl::test {

// Polls cond every 5 ms until it holds or the deadline passes; returns its last value. The
// default deadline is for a loaded machine; a condition that holds returns at once.
template <typename F>
bool eventually(F cond, std::chrono::milliseconds deadline = std::chrono::seconds(20)) {
  auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

inline Result<netlink::LinkInfo> linkInfo(const std::string& netns, const std::string& dev) {
  RECCL_ASSIGN_OR_RETURN(auto nl, netlink::NlSocket::openInNetns(netns));
  return netlink::getLink(nl, dev);
}

// The device is admin up and has carrier (both ends of its cable are up).
inline bool linkRunning(const std::string& netns, const std::string& dev) {
  auto l = linkInfo(netns, dev);
  return l.ok() && l->adminUp() && l->carrier;
}

// Nothing of the drop program left on the device: no pins, no tc filter.
inline bool dropProgramGone(const std::string& netns, const std::string& dev) {
  auto present = inject::faultDropFilterPresent(netns, dev);
  return !inject::faultDropPinned(netns, dev) && present.ok() && !*present;
}

// Runs the reccl CLI built with this tree.
inline testbed::CapturedRun recclCli(const std::vector<std::string>& args,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  std::vector<std::string> argv{RECCL_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = testbed::runCaptured("", argv, timeout);
  if (!r.ok()) {
    testbed::CapturedRun failed;
    failed.err = r.status().ToString();
    return failed;
  }
  return *r;
}

}  // namespace reccl::test
