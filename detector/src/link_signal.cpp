#include "reccl/detector/link_signal.h"

#include <cstring>

namespace reccl::detector {

Direction directionOf(LinkKind kind) noexcept {
  switch (kind) {
    case RECCL_LINK_KIND_CARRIER_DOWN:
    case RECCL_LINK_KIND_ADMIN_DOWN:
    case RECCL_LINK_KIND_RDMA_PORT_ERR:
    case RECCL_LINK_KIND_RDMA_DEVICE_FATAL:
      return Direction::kDown;
    case RECCL_LINK_KIND_CARRIER_UP:
    case RECCL_LINK_KIND_ADMIN_UP:
    case RECCL_LINK_KIND_RDMA_PORT_ACTIVE:
      return Direction::kUp;
    // A stuck TX queue or a stalled byte queue on a link that still has carrier is a gray
    // failure: handled like loss, cleared by quiet time rather than by a carrier event.
    case RECCL_LINK_KIND_TX_TIMEOUT:
    case RECCL_LINK_KIND_DQL_STALL:
    case RECCL_LINK_KIND_DEGRADED:
      return Direction::kDegraded;
    default:
      return Direction::kNone;
  }
}

const char* kindName(LinkKind kind) noexcept {
  switch (kind) {
    case RECCL_LINK_KIND_NONE: return "none";
    case RECCL_LINK_KIND_CARRIER_DOWN: return "carrier_down";
    case RECCL_LINK_KIND_CARRIER_UP: return "carrier_up";
    case RECCL_LINK_KIND_ADMIN_DOWN: return "admin_down";
    case RECCL_LINK_KIND_ADMIN_UP: return "admin_up";
    case RECCL_LINK_KIND_TX_TIMEOUT: return "tx_timeout";
    case RECCL_LINK_KIND_DQL_STALL: return "dql_stall";
    case RECCL_LINK_KIND_RDMA_PORT_ERR: return "rdma_port_err";
    case RECCL_LINK_KIND_RDMA_PORT_ACTIVE: return "rdma_port_active";
    case RECCL_LINK_KIND_RDMA_DEVICE_FATAL: return "rdma_device_fatal";
    case RECCL_LINK_KIND_DEGRADED: return "degraded";
    case RECCL_LINK_KIND_LINKWATCH_SCHEDULED: return "linkwatch_scheduled";
    default: return "unknown";
  }
}

namespace {
constexpr const char* kSourceNames[RECCL_LINK_SRC_COUNT] = {
    "none",           "fentry_carrier", "tp_qdisc_reset",     "rawtp_linkwatch",
    "tp_xmit_timeout", "tp_dql_stall",  "fentry_ib_dispatch", "tp_tcp_retransmit",
    "rtnetlink",      "rdma_async",     "inband",             "rdma_counters"};
}

const char* sourceName(LinkSource src) noexcept {
  if (src < 0 || src >= RECCL_LINK_SRC_COUNT) return "unknown";
  return kSourceNames[src];
}

std::optional<LinkSource> sourceFromName(std::string_view name) noexcept {
  for (int i = 1; i < RECCL_LINK_SRC_COUNT; ++i)
    if (name == kSourceNames[i]) return static_cast<LinkSource>(i);
  return std::nullopt;
}

}  // namespace reccl::detector
