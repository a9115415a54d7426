// How carrier-off/on reach a device: a tap's carrier (TUNSETCARRIER), or a lab VM's cable. In the
// stock-kernel lab (tools/lab/lab.sh, docs/lab.md) every NIC of a VM is a virtio NIC on a qemu
// socket link, and the runner on the host pulls or plugs its cable through the qemu monitor when
// the guest prints "@@lab-monitor set_link DEV off|on" on its serial console. The guest's driver
// then drops or raises the carrier the way a physical NIC's driver reports a cable, so a plan
// acts on such a NIC as it acts on a tap.
#pragma once

#include <cstdint>
#include <string_view>

#include "reccl/common/status.h"
#include "reccl/inject/target.h"

namespace reccl::inject {

enum class CarrierControl { kTap, kLabCable };

// The runner serves the console every 50 ms, but a loaded host running TCG guests can take
// seconds to get there; past this the request is taken as lost.
inline constexpr int64_t kLabCableWaitMs = 30000;

// Pure: how carrier actions reach the device, or kInvalidArgument saying what they need. A lab
// cable is a virtio NIC (`driver` "virtio_net") in the root namespace of a lab VM (`inLab`:
// RECCL_TEST_LAB set, as lab.sh sets it in every guest).
Result<CarrierControl> carrierControlFor(const ResolvedTarget& t, bool inLab, std::string_view driver);

// The same for a device of this machine: reads RECCL_TEST_LAB and, for a root-namespace device
// that is not a tap, its driver in sysfs.
Result<CarrierControl> carrierControl(const ResolvedTarget& t);

// Returns at once when the device's carrier (sysfs; rtnetlink for an admin-down device) is as
// asked; else prints the
// runner's request on the console and returns once it does; kTimeout naming the device after
// `waitMs`.
Status setLabCable(const ResolvedTarget& t, bool on, int64_t waitMs = kLabCableWaitMs);

}  // namespace reccl::inject
