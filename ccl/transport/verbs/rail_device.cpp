#include "transport/verbs/rail_device.h"

#include <fcntl.h>

#include <cerrno>

#include "reccl/common/deadline.h"

namespace reccl::transport::verbs {

Result<std::unique_ptr<RailDevice>> RailDevice::open(int rail, const RailNic& nic, const RdmaInventory& inv,
                                                     int forcedGidIndex) {
  RECCL_ASSIGN_OR_RETURN(RailPort port, mapRail(inv, nic, forcedGidIndex));
  std::unique_ptr<RailDevice> d(new RailDevice());
  d->rail_ = rail;
  d->netdev_ = nic.name;
  d->port_ = port;
  RECCL_ASSIGN_OR_RETURN(DeviceList list, DeviceList::get());
  for (ibv_device* device : list.devices())
    if (!d->ctx_ && port.device == ibv_get_device_name(device)) {
      ibv_context* ctx = ibv_open_device(device);
      if (!ctx) return Status::FromErrno(errno, "rdma: open " + port.device);
      d->ctx_ = Context(ctx, "device context");
    }
  if (!d->ctx_) return Status(Errc::kNotFound, "rdma: device " + port.device + " of rail NIC " + nic.name + " is gone");
  int flags = fcntl(d->ctx_->async_fd, F_GETFL);
  if (flags < 0 || fcntl(d->ctx_->async_fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return Status::FromErrno(errno, "rdma: async events of " + port.device + " non-blocking");
  ibv_pd* pd = ibv_alloc_pd(d->ctx_.get());
  if (!pd) return Status::FromErrno(errno, "rdma: protection domain on " + port.device);
  d->pd_ = ProtectionDomain(pd, "protection domain");
  RECCL_INFO(kLogNet, "rail %d: %s -> %s port %u gid #%u %s (%s), mtu %u, %s", rail, nic.name.c_str(), port.device.c_str(),
             port.port, port.gidIndex, gidString(port.gid).c_str(), gidTypeName(port.gidType), mtuBytes(port.activeMtu),
             port.state.c_str());
  return d;
}

Result<bool> RailDevice::portActive() const {
  ibv_port_attr pa{};
  if (int rc = ibv_query_port(ctx_.get(), port_.port, &pa); rc != 0)
    return Status::FromErrno(rc, "rdma: query " + port_.device + " port " + std::to_string(port_.port));
  return pa.state == IBV_PORT_ACTIVE;
}

std::vector<RailDevice::AsyncEvent> RailDevice::readAsyncEvents() {
  std::vector<AsyncEvent> out;
  ibv_async_event ev{};
  while (ctx_ && ibv_get_async_event(ctx_.get(), &ev) == 0) {
    AsyncEvent a{ev.event_type, 0, monotonicNs()};
    switch (ev.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_COMM_EST:
      case IBV_EVENT_SQ_DRAINED:
      case IBV_EVENT_PATH_MIG:
      case IBV_EVENT_PATH_MIG_ERR:
      case IBV_EVENT_QP_LAST_WQE_REACHED:
        a.element = ev.element.qp ? ev.element.qp->qp_num : 0;
        break;
      case IBV_EVENT_PORT_ACTIVE:
      case IBV_EVENT_PORT_ERR:
      case IBV_EVENT_LID_CHANGE:
      case IBV_EVENT_PKEY_CHANGE:
      case IBV_EVENT_SM_CHANGE:
      case IBV_EVENT_CLIENT_REREGISTER:
      case IBV_EVENT_GID_CHANGE:
        a.element = static_cast<uint32_t>(ev.element.port_num);
        break;
      default: break;
    }
    ibv_ack_async_event(&ev);
    out.push_back(a);
  }
  return out;
}

Status RailDevice::close() {
  Status pd = pd_.close();
  Status ctx = ctx_.close();
  return pd.ok() ? ctx : pd.Wrap("rail " + std::to_string(rail_) + " (" + port_.device + ")");
}

}  // namespace reccl::transport::verbs
