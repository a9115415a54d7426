#include "reccl/detector/rdma_async_source.h"

#include <fcntl.h>
#include <net/if.h>

#include <cerrno>

#include "reccl/common/log.h"
#include "reccl/detector/rdma_sysfs.h"

#ifdef RECCL_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace reccl::detector {

struct RdmaAsyncSource::Device {
  std::string name;
#ifdef RECCL_HAVE_IBVERBS
  ibv_context* ctx = nullptr;
#endif
  int fd = -1;
};

Result<std::unique_ptr<RdmaAsyncSource>> RdmaAsyncSource::open(uint32_t ownNetnsIno) {
#ifndef RECCL_HAVE_IBVERBS
  (void)ownNetnsIno;
  return Status(Errc::kUnsupported, "rdma: built without libibverbs");
#else
  std::unique_ptr<RdmaAsyncSource> src(new RdmaAsyncSource());
  src->netnsIno_ = ownNetnsIno;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list) ibv_free_device_list(list);
    return Status(Errc::kUnsupported, "rdma: no verbs devices on this machine");
  }
  for (int i = 0; i < n; ++i) {
    auto d = std::make_unique<Device>();
    d->name = ibv_get_device_name(list[i]);
    d->ctx = ibv_open_device(list[i]);
    if (!d->ctx) {
      RECCL_WARN(kLogDetector, "rdma: open %s: %s", d->name.c_str(), strerror(errno));
      continue;
    }
    d->fd = d->ctx->async_fd;
    int flags = fcntl(d->fd, F_GETFL);
    fcntl(d->fd, F_SETFL, flags | O_NONBLOCK);
    src->devices_.push_back(std::move(d));
  }
  ibv_free_device_list(list);
  if (src->devices_.empty()) return Status(Errc::kUnsupported, "rdma: no verbs device could be opened");
  return src;
#endif
}

RdmaAsyncSource::~RdmaAsyncSource() {
#ifdef RECCL_HAVE_IBVERBS
  for (auto& d : devices_)
    if (d->ctx) ibv_close_device(d->ctx);
#endif
}

std::vector<int> RdmaAsyncSource::fds() const {
  std::vector<int> v;
  for (const auto& d : devices_) v.push_back(d->fd);
  return v;
}

std::vector<std::string> RdmaAsyncSource::devices() const {
  std::vector<std::string> v;
  for (const auto& d : devices_) v.push_back(d->name);
  return v;
}

std::string RdmaAsyncSource::deviceOf(int fd) const {
  for (const auto& d : devices_)
    if (d->fd == fd) return d->name;
  return "";
}

void RdmaAsyncSource::drain(int fd, uint64_t nowNs, std::vector<LinkSignal>& out) {
#ifdef RECCL_HAVE_IBVERBS
  for (auto& d : devices_) {
    if (d->fd != fd) continue;
    ibv_async_event ev{};
    while (ibv_get_async_event(d->ctx, &ev) == 0) {
      LinkKind kind = RECCL_LINK_KIND_NONE;
      uint32_t port = 0;
      switch (ev.event_type) {
        case IBV_EVENT_PORT_ERR: kind = RECCL_LINK_KIND_RDMA_PORT_ERR; port = ev.element.port_num; break;
        case IBV_EVENT_PORT_ACTIVE: kind = RECCL_LINK_KIND_RDMA_PORT_ACTIVE; port = ev.element.port_num; break;
        case IBV_EVENT_DEVICE_FATAL: kind = RECCL_LINK_KIND_RDMA_DEVICE_FATAL; port = 1; break;
        default: break;
      }
      ibv_ack_async_event(&ev);
      if (kind == RECCL_LINK_KIND_NONE) continue;
      std::string netdev = rdmaPortNetdev(kInfinibandSysfs, d->name, port);
      unsigned ifindex = netdev.empty() ? 0 : if_nametoindex(netdev.c_str());
      if (!ifindex) continue;  // an InfiniBand port has no netdev to name the link by
      LinkSignal s;
      s.kind = kind;
      s.source = RECCL_LINK_SRC_RDMA_ASYNC;
      s.tsNs = nowNs;
      s.link = {netnsIno_, ifindex};
      s.ifname = netdev;
      s.value = port;
      out.push_back(std::move(s));
    }
  }
#else
  (void)fd;
  (void)nowNs;
  (void)out;
#endif
}

}  // namespace reccl::detector
