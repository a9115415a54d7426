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

Result<FusedDevice> discoverFusedDevice() {
  auto all = core::listNics();
  // The bootstrap NIC as a communicator's root picks it (recclGetUniqueId), which an unset
  // RECCL_NICS leaves out, as a communicator does.
  RECCL_ASSIGN_OR_RETURN(uint32_t bootAddr, api::bootstrapAddress());
  auto nics = core::selectNics(all, params::Nics(), core::nicWithAddress(all, bootAddr));
  if (nics.empty())
    return Status(Errc::kInvalidArgument, "RECCL_NICS=" + params::Nics() + " matches no usable interface");
  FusedDevice d;
  d.name = "reccl:";
  for (size_t i = 0; i < nics.size(); ++i) {
    d.nics.push_back(nics[i].name);
    d.name += (i ? "+" : "") + nics[i].name;
    d.speedMbps += nicSpeedMbps(readSmallFile("/sys/class/net/" + nics[i].name + "/speed"));
  }
  d.pciPath = pciPathOf(nics.front().name);
  return d;
}

}  // namespace reccl::nccl_net
