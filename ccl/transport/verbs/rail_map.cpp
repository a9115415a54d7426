#include "transport/verbs/rail_map.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "reccl/common/log.h"
#include "transport/verbs/verbs_handle.h"

namespace reccl::transport::verbs {

const char* gidTypeName(GidType t) noexcept {
  switch (t) {
    case GidType::kIb: return "IB";
    case GidType::kRoceV1: return "RoCEv1";
    case GidType::kRoceV2: return "RoCEv2";
  }
  return "?";
}

std::array<uint8_t, 16> ipv4MappedGid(uint32_t ipv4) noexcept {
  std::array<uint8_t, 16> g{};
  g[10] = 0xff;
  g[11] = 0xff;
  std::memcpy(g.data() + 12, &ipv4, 4);
  return g;
}

std::string gidString(const std::array<uint8_t, 16>& gid) {
  char buf[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, gid.data(), buf, sizeof(buf));
  return buf;
}

namespace {
bool isIpv4Mapped(const std::array<uint8_t, 16>& g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.data(), prefix, 12) == 0;
}
bool isLinkLocal(const std::array<uint8_t, 16>& g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }
bool isZero(const std::array<uint8_t, 16>& g) {
  return std::all_of(g.begin(), g.end(), [](uint8_t b) { return b == 0; });
}

// Lower is better; -1: not usable for a rail.
int rank(const GidRecord& r, uint32_t ipv4) {
  if (r.type != GidType::kRoceV2 || isZero(r.gid)) return -1;
  if (isIpv4Mapped(r.gid)) return ipv4 && r.gid == ipv4MappedGid(ipv4) ? 0 : 1;
  return isLinkLocal(r.gid) ? -1 : 2;
}
}  // namespace

Result<RailPort> mapRail(const RdmaInventory& inv, const RailNic& nic, int forcedGidIndex) {
  const GidRecord* best = nullptr;
  int bestRank = 3;
  std::string offered;
  for (const GidRecord& r : inv.gids) {
    if (r.ifindex != nic.ifindex || nic.ifindex == 0) continue;
    offered += (offered.empty() ? "" : ", ") + r.device + "/" + std::to_string(r.port) + " #" + std::to_string(r.index) +
               " " + gidString(r.gid) + " " + gidTypeName(r.type);
    if (forcedGidIndex >= 0) {
      if (r.index == forcedGidIndex && !best) best = &r;
      continue;
    }
    int k = rank(r, nic.ipv4);
    if (k >= 0 && k < bestRank) {
      best = &r;
      bestRank = k;
    }
  }
  if (!best) {
    std::string want = forcedGidIndex >= 0 ? "GID index " + std::to_string(forcedGidIndex) + " (RECCL_IB_GID_INDEX)"
                                           : std::string("a RoCEv2 GID");
    return Status(Errc::kNotFound, "rail NIC " + nic.name + ": no RDMA port with " + want +
                                       (offered.empty() ? " (no RDMA device is bound to it)" : " (it has: " + offered + ")"));
  }
  RailPort p;
  p.device = best->device;
  p.port = best->port;
  p.gidIndex = best->index;
  p.gid = best->gid;
  p.gidType = best->type;
  auto port = std::find_if(inv.ports.begin(), inv.ports.end(),
                           [&](const PortRecord& pr) { return pr.device == best->device && pr.port == best->port; });
  if (port == inv.ports.end())
    return Status(Errc::kNotFound, "rail NIC " + nic.name + ": " + best->device + " port " + std::to_string(best->port) +
                                       " has GIDs but no port record");
  p.active = port->active;
  p.state = port->state;
  p.activeMtu = port->activeMtu;
  p.lid = port->lid;
  return p;
}

Result<RdmaInventory> readRdmaInventory() {
  RdmaInventory inv;
  RECCL_ASSIGN_OR_RETURN(DeviceList list, DeviceList::get());
  for (ibv_device* device : list.devices()) {
    const char* name = ibv_get_device_name(device);
    Context ctx(ibv_open_device(device), "device context");
    if (!ctx) {
      RECCL_WARN(kLogNet, "rdma: open %s: %s", name, strerror(errno));
      continue;
    }
    ibv_device_attr dev{};
    if (int rc = ibv_query_device(ctx.get(), &dev); rc != 0) {
      RECCL_WARN(kLogNet, "rdma: query %s: %s", name, strerror(rc));
      continue;
    }
    size_t gids = 0;
    for (uint8_t port = 1; port <= dev.phys_port_cnt; ++port) {
      ibv_port_attr pa{};
      if (ibv_query_port(ctx.get(), port, &pa) != 0) continue;
      gids += static_cast<size_t>(pa.gid_tbl_len);
      inv.ports.push_back({name, port, pa.state == IBV_PORT_ACTIVE, ibv_port_state_str(pa.state), pa.active_mtu,
                           pa.link_layer == IBV_LINK_LAYER_INFINIBAND ? pa.lid : uint16_t{0}});
    }
    std::vector<ibv_gid_entry> entries(std::max<size_t>(gids, 1));
    ssize_t got = ibv_query_gid_table(ctx.get(), entries.data(), entries.size(), 0);
    if (got < 0) {
      RECCL_WARN(kLogNet, "rdma: GID table of %s: %s", name, strerror(static_cast<int>(-got)));
    } else {
      for (ssize_t k = 0; k < got; ++k) {
        const ibv_gid_entry& e = entries[k];
        GidRecord r;
        r.device = name;
        r.port = static_cast<uint8_t>(e.port_num);
        r.index = static_cast<uint16_t>(e.gid_index);
        r.type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? GidType::kRoceV2
                 : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::kRoceV1
                                                      : GidType::kIb;
        r.ifindex = e.ndev_ifindex;
        std::memcpy(r.gid.data(), e.gid.raw, 16);
        inv.gids.push_back(std::move(r));
      }
    }
  }
  return inv;
}

Result<RailNic> railNicByName(const std::string& name) {
  RailNic nic;
  nic.name = name;
  nic.ifindex = if_nametoindex(name.c_str());
  if (!nic.ifindex) return Status::FromErrno(errno, "rail NIC " + name);
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return Status::FromErrno(errno, "getifaddrs");
  for (ifaddrs* a = ifa; a; a = a->ifa_next)
    if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && name == a->ifa_name) {
      nic.ipv4 = reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr;
      break;
    }
  freeifaddrs(ifa);
  return nic;
}

}  // namespace reccl::transport::verbs
