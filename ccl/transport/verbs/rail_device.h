// One rail NIC's RDMA device as this process uses it: the opened device, one protection domain
// (every connection's slots are registered on it up front), and the port and GID the rail maps
// to (rail_map.h). Its async event descriptor reports port errors and fatal QP events in band.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "transport/verbs/qp_settings.h"
#include "transport/verbs/rail_map.h"
#include "transport/verbs/verbs_handle.h"

namespace reccl::transport::verbs {

class RailDevice {
 public:
  // Opens the device that serves `nic` as rail `rail` and allocates its protection domain.
  // A port that is not ACTIVE is no error here (it may come back); portActive() tells.
  static Result<std::unique_ptr<RailDevice>> open(int rail, const RailNic& nic, const RdmaInventory& inv,
                                                  int forcedGidIndex = -1);
  RailDevice(const RailDevice&) = delete;
  RailDevice& operator=(const RailDevice&) = delete;

  int rail() const noexcept { return rail_; }
  const std::string& netdev() const noexcept { return netdev_; }
  const RailPort& port() const noexcept { return port_; }
  LocalPort localPort() const noexcept { return {port_.port, port_.gidIndex, port_.activeMtu}; }
  ibv_context* context() const noexcept { return ctx_.get(); }
  ibv_pd* pd() const noexcept { return pd_.get(); }

  // The port's state now (ibv_query_port).
  Result<bool> portActive() const;

  struct AsyncEvent {
    ibv_event_type type;
    uint32_t element = 0;  // port number, or QP number for QP events
    uint64_t readNs = 0;   // CLOCK_MONOTONIC when it was read
  };
  // Non-blocking: poll(2) it for POLLIN, then readAsyncEvents().
  int asyncFd() const noexcept { return ctx_ ? ctx_->async_fd : -1; }
  // Every event pending on the device (each acknowledged at once).
  std::vector<AsyncEvent> readAsyncEvents();

  // Frees the PD, then closes the device. EBUSY from the PD means a registration or a QP on this
  // rail was left behind.
  Status close();

 private:
  RailDevice() = default;
  int rail_ = -1;
  std::string netdev_;
  RailPort port_;
  Context ctx_;          // destroyed last
  ProtectionDomain pd_;  // destroyed first
};

}  // namespace reccl::transport::verbs
