// Link faults through rtnetlink: admin state (IFF_UP) of a device and, for tap NICs, the carrier
// (TUNSETCARRIER, the path a physical NIC's driver takes). Keeps one netlink socket per namespace
// so that a scheduled action costs one request, not a socket set-up.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "reccl/inject/target.h"
#include "reccl/netlink/link_info.h"
#include "reccl/netlink/nl_socket.h"

namespace reccl::inject {

// Closes tap queue fds on a background thread: detaching a tun queue waits for an RCU grace
// period (milliseconds), which must not delay the next scheduled action.
class FdReaper {
 public:
  FdReaper() = default;
  ~FdReaper();  // closes whatever is left, joins
  FdReaper(const FdReaper&) = delete;
  FdReaper& operator=(const FdReaper&) = delete;
  void close(UniqueFd fd);

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<UniqueFd> pending_;
  bool stop_ = false;
  std::thread thread_;
};

class LinkControl {
 public:
  // deferClose: tap queues attached for TUNSETCARRIER are closed off the caller's thread.
  explicit LinkControl(bool deferClose = false);

  Status setAdminUp(const ResolvedTarget& t, bool up);
  // kInvalidArgument when the device is not a tap.
  Status setCarrier(const ResolvedTarget& t, bool on);
  Result<netlink::LinkInfo> query(const ResolvedTarget& t);

 private:
  Result<netlink::NlSocket*> socketFor(const std::string& netns);
  std::map<std::string, netlink::NlSocket> sockets_;
  std::unique_ptr<FdReaper> reaper_;
};

// True for the device kinds TUNSETCARRIER works on.
inline bool isTapKind(const std::string& kind) { return kind == "tun" || kind == "tap"; }

}  // namespace reccl::inject
