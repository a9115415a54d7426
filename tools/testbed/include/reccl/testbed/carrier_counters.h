// A NIC's carrier as its driver set it last, read without side effects. The kernel counts every
// carrier change the moment netif_carrier_on/off runs (carrier_up_count / carrier_down_count in
// sysfs, read without a lock). Every other read lags or disturbs what it reads: rtnetlink's
// events and the operstate wait for link-watch, which may hold a change back for up to a second;
// RTM_GETLINK, /sys/class/net/IF/carrier and ethtool's get-link run the device's pending
// link-watch work first, so reading through them would end the very delay a physical NIC shows.
//
// The testbed's tap forwarder gates frames on this, so a carrier fault cuts traffic at once, as
// pulling a cable does, whatever rtnetlink has been told by then.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::testbed {

class CarrierCounters {
 public:
  // Opens the device's counters in /run/netns/NETNS ("" the caller's namespace) through a sysfs
  // instance mounted for that namespace (fsmount, detached: no mount namespace changes), and takes
  // the carrier once from rtnetlink as the baseline (a read that may run link-watch, fine while
  // setting up). kNotFound when the device does not exist; kUnsupported on a kernel without the
  // mount API (before 5.2).
  static Result<CarrierCounters> open(const std::string& netns, const std::string& dev);

  // Whether the carrier is on now. Off and on alternate, each counted once, so the carrier is on
  // exactly when up - down equals its value at a moment it was on. Two preads at most and no
  // allocation on success (callable in a forked child). Errors only when a read fails (device
  // gone).
  Result<bool> on();
  // The same, reading one counter when it has not moved since the last read (the cheap check
  // for a loop that asks often): off -> on moves only `up`, on -> off only `down`.
  Result<bool> onCached();
  // The two descriptors (up, down), which a forked holder must keep open.
  std::array<int, 2> fds() const { return {up_.get(), down_.get()}; }

 private:
  CarrierCounters() = default;
  Result<int64_t> read(int fd) const;

  UniqueFd up_;
  UniqueFd down_;
  int64_t upSeen_ = 0;
  int64_t downSeen_ = 0;
  int64_t diffWhenOn_ = 0;
};

}  // namespace reccl::testbed
