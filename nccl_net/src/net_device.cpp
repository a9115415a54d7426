#include "net_device.h"

#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "api/comm_handle.h"
#include "core/topology.h"
#include "reccl/common/params.h"

namespace reccl::nccl_net {

namespace {

constexpr int kUnknownSpeedMbps = 10000;

std::string readSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string pciPathOf(const std::string& nic) {
  char resolved[PATH_MAX];
  std::string link = "/sys/class/net/" + nic + "/device";
  if (realpath(link.c_str(), resolved) == nullptr) return "";
  return resolved;
}

}  // namespace

int nicSpeedMbps(const std::string& sysfsText) {
  char* end = nullptr;
  long v = std::strtol(sysfsText.c_str(), &end, 10);
  if (end == sysfsText.c_str() || v <= 0 || v > INT_MAX) return kUnknownSpeedMbps;
  return static_cast<int>(v);
}

std::vector<NetDevice> devicesOver(const std::vector<NicFacts>& nics, bool fused) {
  std::vector<NetDevice> out;
  if (nics.empty()) return out;
  if (fused) {
    NetDevice d;
    d.name = "reccl:";
    for (size_t i = 0; i < nics.size(); ++i) {
      d.name += (i ? "+" : "") + nics[i].name;
      d.speedMbps += nics[i].speedMbps;
    }
    d.pciPath = nics.front().pciPath;
    out.push_back(std::move(d));
    return out;
  }
  for (const auto& n : nics) {
    NetDevice d;
    d.homeNic = n.name;
    d.name = "reccl:" + n.name;
    d.speedMbps = n.speedMbps;
    d.pciPath = n.pciPath;
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::vector<NetDevice>> discoverDevices() {
  RECCL_TRY(params::validateAll());  // RECCL_NET_DEVICES among them, as a communicator's init checks them
  auto all = core::listNics();
  // The bootstrap NIC as a communicator's root picks it (recclGetUniqueId), which an unset
  // RECCL_NICS leaves out, as a communicator does.
  RECCL_ASSIGN_OR_RETURN(uint32_t bootAddr, api::bootstrapAddress());
  auto nics = core::selectNics(all, params::Nics(), core::nicWithAddress(all, bootAddr));
  if (nics.empty())
    return Status(Errc::kInvalidArgument, "RECCL_NICS=" + params::Nics() + " matches no usable interface");
  std::vector<NicFacts> facts;
  for (const auto& n : nics)
    facts.push_back({n.name, nicSpeedMbps(readSmallFile("/sys/class/net/" + n.name + "/speed")), pciPathOf(n.name)});
  return devicesOver(facts, params::NetDevices() == "fused");
}

}  // namespace reccl::nccl_net
