#include "reccl/detector/rdma_sysfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace reccl::detector {
namespace {

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') out.emplace_back(e->d_name);
  closedir(d);
  return out;
}

bool readable(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

// The counters named here that `dir` holds, as paths.
std::vector<std::string> present(const std::string& dir, std::initializer_list<const char*> names) {
  std::vector<std::string> out;
  for (const char* n : names)
    if (std::string p = dir + "/" + n; readable(p)) out.push_back(std::move(p));
  return out;
}

}  // namespace

std::string rdmaPortNetdev(const std::string& root, const std::string& dev, uint32_t port) {
  std::ifstream f(root + "/" + dev + "/ports/" + std::to_string(port) + "/gid_attrs/ndevs/0");
  std::string name;
  if (f) std::getline(f, name);
  return name;
}

std::vector<RdmaPortCounters> listRdmaLossPorts(const std::string& root) {
  std::vector<RdmaPortCounters> out;
  for (const auto& dev : entries(root)) {
    for (const auto& p : entries(root + "/" + dev + "/ports")) {
      char* end = nullptr;
      unsigned long port = std::strtoul(p.c_str(), &end, 10);
      if (end == p.c_str() || *end != '\0' || port == 0 || port > 255) continue;
      RdmaPortCounters c;
      c.dev = dev;
      c.port = static_cast<uint32_t>(port);
      c.netdev = rdmaPortNetdev(root, dev, c.port);
      if (c.netdev.empty()) continue;
      const std::string dir = root + "/" + dev + "/ports/" + p;
      c.lossFiles = present(dir + "/hw_counters",
                            {"out_of_seq_request", "rcvd_seq_err", "out_of_sequence", "packet_seq_err",
                             "implied_nak_seq_err"});
      if (c.lossFiles.empty()) continue;
      c.packetFiles = present(dir + "/hw_counters", {"sent_pkts", "rcvd_pkts"});
      if (c.packetFiles.size() != 2) c.packetFiles = present(dir + "/counters", {"port_xmit_packets", "port_rcv_packets"});
      if (c.packetFiles.size() != 2) c.packetFiles.clear();
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::optional<uint64_t> readCounterSum(const std::vector<std::string>& files) {
  uint64_t sum = 0;
  for (const auto& f : files) {
    int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    char buf[32];
    ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (n <= 0) return std::nullopt;
    buf[n] = '\0';
    char* end = nullptr;
    unsigned long long v = std::strtoull(buf, &end, 10);
    if (end == buf) return std::nullopt;
    sum += v;
  }
  return sum;
}

}  // namespace reccl::detector
