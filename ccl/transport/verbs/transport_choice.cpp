#include "transport/verbs/transport_choice.h"

#include <strings.h>

namespace reccl::transport::verbs {

const char* transportModeName(TransportMode m) noexcept {
  switch (m) {
    case TransportMode::kAuto: return "auto";
    case TransportMode::kVerbs: return "verbs";
    case TransportMode::kSocket: return "socket";
  }
  return "?";
}

Result<TransportMode> parseTransportMode(std::string_view text) {
  for (TransportMode m : {TransportMode::kAuto, TransportMode::kVerbs, TransportMode::kSocket}) {
    std::string_view name = transportModeName(m);
    if (text.size() == name.size() && strncasecmp(text.data(), name.data(), name.size()) == 0) return m;
  }
  return Status(Errc::kInvalidArgument, "RECCL_TRANSPORT=" + std::string(text) + ": expected auto, verbs or socket");
}

RankRdma railReadiness(int rank, const RdmaInventory& inv, std::span<const RailNic> rails, int forcedGidIndex) {
  RankRdma r;
  r.rank = rank;
  if (rails.empty()) {
    r.reason = "no rail NICs";
    return r;
  }
  for (const RailNic& nic : rails) {
    auto port = mapRail(inv, nic, forcedGidIndex);
    if (!port.ok()) {
      r.reason = port.status().message();
      return r;
    }
    if (!port->active) {
      r.reason = "rail NIC " + nic.name + ": " + port->device + " port " + std::to_string(port->port) + " is " +
                 (port->state.empty() ? "not active" : port->state);
      return r;
    }
  }
  r.ready = true;
  return r;
}

Result<TransportDecision> decideTransport(TransportMode mode, std::span<const RankRdma> ranks) {
  if (mode == TransportMode::kSocket) return TransportDecision{false, "RECCL_TRANSPORT=socket"};
  for (const RankRdma& r : ranks) {
    if (r.ready) continue;
    std::string why = "rank " + std::to_string(r.rank) + " has no RDMA on its rails: " + r.reason;
    if (mode == TransportMode::kVerbs) return Status(Errc::kUnsupported, "RECCL_TRANSPORT=verbs: " + why);
    return TransportDecision{false, "sockets: " + why};
  }
  if (ranks.empty()) {
    if (mode == TransportMode::kVerbs) return Status(Errc::kUnsupported, "RECCL_TRANSPORT=verbs: no ranks reported");
    return TransportDecision{false, "sockets: no ranks reported"};
  }
  return TransportDecision{true, "verbs: every rank has an active RDMA port on each of its rails"};
}

}  // namespace reccl::transport::verbs
