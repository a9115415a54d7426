#include "core/comm_transport.h"

#include "reccl/common/params.h"

#if RECCL_HAVE_VERBS
#include "transport/verbs/rail_map.h"
#include "transport/verbs/transport_choice.h"
#include "transport/verbs/verbs_path_factory.h"
#endif

namespace reccl::core {
namespace {

constexpr size_t kWhyMax = 400;  // the rank info carries at most 512 bytes of it

}  // namespace

Status fillTransportReport(RankInfo* info, const std::vector<NicInfo>& nics) {
  const std::string text = params::Transport();
#if RECCL_HAVE_VERBS
  using namespace transport::verbs;
  RECCL_ASSIGN_OR_RETURN(TransportMode mode, parseTransportMode(text));
  info->transport = mode == TransportMode::kVerbs ? kTransportVerbs
                    : mode == TransportMode::kSocket ? kTransportSocket
                                                     : kTransportAuto;
  info->rdmaReady = false;
  if (mode == TransportMode::kSocket) {
    info->rdmaWhy = "RECCL_TRANSPORT=socket";
    return Status::Ok();
  }
  auto inv = readRdmaInventory();
  if (!inv.ok()) {
    info->rdmaWhy = inv.status().message().substr(0, kWhyMax);
    return Status::Ok();
  }
  std::vector<RailNic> rails;
  for (size_t r = 0; r < nics.size(); ++r) {
    auto nic = railNicByName(nics[r].name);
    if (!nic.ok()) {
      info->rdmaWhy = ("rail " + std::to_string(r) + " (" + nics[r].name + "): " + nic.status().message()).substr(0, kWhyMax);
      return Status::Ok();
    }
    rails.push_back(*nic);
  }
  RankRdma mine = railReadiness(info->rank, *inv, rails, static_cast<int>(params::IbGidIndex()));
  info->rdmaReady = mine.ready;
  info->rdmaWhy = mine.reason.substr(0, kWhyMax);
#else
  (void)nics;
  if (text != "auto" && text != "verbs" && text != "socket")
    return Status(Errc::kInvalidArgument, "RECCL_TRANSPORT=" + text + ": expected auto, verbs or socket");
  info->transport = text == "verbs" ? kTransportVerbs : text == "socket" ? kTransportSocket : kTransportAuto;
  info->rdmaReady = false;
  info->rdmaWhy = "reccl was built without the verbs transport (libibverbs)";
#endif
  return Status::Ok();
}

Result<TransportChoice> chooseTransport(const std::vector<RankInfo>& table) {
  if (table.empty()) return TransportChoice{false, "no ranks"};
  const uint8_t mode = table[0].transport;
#if RECCL_HAVE_VERBS
  using namespace transport::verbs;
  std::vector<RankRdma> ranks;
  for (const auto& r : table) ranks.push_back({r.rank, r.rdmaReady, r.rdmaWhy});
  TransportMode m = mode == kTransportVerbs ? TransportMode::kVerbs
                    : mode == kTransportSocket ? TransportMode::kSocket
                                               : TransportMode::kAuto;
  RECCL_ASSIGN_OR_RETURN(TransportDecision d, decideTransport(m, ranks));
  return TransportChoice{d.verbs, d.why};
#else
  if (mode == kTransportVerbs)
    return Status(Errc::kUnsupported, "RECCL_TRANSPORT=verbs: " + table[0].rdmaWhy);
  return TransportChoice{false, "sockets: " + table[0].rdmaWhy};
#endif
}

Result<std::unique_ptr<transport::PathFactory>> makeVerbsPaths(transport::PathFactory* tcp,
                                                               const std::vector<NicInfo>& nics) {
#if RECCL_HAVE_VERBS
  using namespace transport::verbs;
  VerbsPathFactoryConfig cfg;
  cfg.sideChannel = tcp;
  for (const auto& n : nics) cfg.railNics.push_back(n.name);
  RECCL_ASSIGN_OR_RETURN(cfg.settings, qpSettingsFromParams());
  cfg.gidIndex = static_cast<int>(params::IbGidIndex());
  RECCL_ASSIGN_OR_RETURN(auto f, VerbsPathFactory::create(std::move(cfg)));
  return std::unique_ptr<transport::PathFactory>(std::move(f));
#else
  (void)tcp;
  (void)nics;
  return Status(Errc::kUnsupported, "reccl was built without the verbs transport (libibverbs)");
#endif
}

}  // namespace reccl::core
