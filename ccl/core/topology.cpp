#include "core/topology.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>

namespace reccl::core {

NicFilter parseNicFilter(std::string_view spec) {
  NicFilter f;
  if (!spec.empty() && spec[0] == '^') {
    f.exclude = true;
    spec.remove_prefix(1);
  }
  if (!spec.empty() && spec[0] == '=') {
    f.exact = true;
    spec.remove_prefix(1);
  }
  while (!spec.empty()) {
    auto comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    if (!item.empty()) f.names.emplace_back(item);
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  return f;
}

bool nicMatches(const NicFilter& f, std::string_view name) {
  bool hit = false;
  for (const auto& n : f.names) {
    if (f.exact ? name == n : name.substr(0, n.size()) == n) {
      hit = true;
      break;
    }
  }
  return f.exclude ? !hit : hit;
}

std::vector<NicInfo> selectNics(std::vector<NicInfo> all, std::string_view spec, std::string_view bootstrapNic) {
  std::sort(all.begin(), all.end(), [](const NicInfo& a, const NicInfo& b) { return a.name < b.name; });
  std::vector<NicInfo> out;
  if (!spec.empty()) {
    NicFilter f = parseNicFilter(spec);
    for (auto& n : all)
      if (nicMatches(f, n.name)) out.push_back(n);
    return out;
  }
  for (auto& n : all)
    if (n.name != "lo" && n.name != bootstrapNic) out.push_back(n);
  if (!out.empty()) return out;
  for (auto& n : all)
    if (n.name == bootstrapNic && n.name != "lo") out.push_back(n);
  if (!out.empty()) return out;
  for (auto& n : all)
    if (n.name == "lo") out.push_back(n);
  return out;
}

int nicIndex(const std::vector<NicInfo>& nics, std::string_view name) {
  for (size_t i = 0; i < nics.size(); ++i)
    if (nics[i].name == name) return static_cast<int>(i);
  return -1;
}

std::vector<NicInfo> listNics() {
  std::vector<NicInfo> out;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP)) continue;
    std::string name(i->ifa_name);
    if (name.size() > 15) continue;
    bool dup = false;
    for (auto& n : out) dup |= n.name == name;
    if (dup) continue;  // first IPv4 address per interface
    out.push_back({name, reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr});
  }
  freeifaddrs(ifs);
  return out;
}

std::string nicWithAddress(const std::vector<NicInfo>& nics, uint32_t addr) {
  for (const auto& n : nics)
    if (n.addr == addr) return n.name;
  return "";
}

std::string hostName() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

std::string hostIdentity() {
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  struct stat st {};
  unsigned long long ns = 0;
  if (stat("/proc/self/ns/net", &st) == 0) ns = static_cast<unsigned long long>(st.st_ino);
  std::string id = boot + "/" + hostName() + "/net:" + std::to_string(ns);
  for (auto& c : id)
    if (c < 0x20 || c > 0x7e) c = '?';
  return id;
}

std::string machineOf(const std::string& hostId) {
  std::string boot = hostId.substr(0, hostId.find('/'));
  return boot.empty() ? hostId : boot;
}

int cpusFromCpuMax(std::string_view line) {
  auto sp = line.find(' ');
  if (sp == std::string_view::npos) return 0;
  std::string_view q = line.substr(0, sp), p = line.substr(sp + 1);
  while (!p.empty() && (p.back() == '\n' || p.back() == ' ')) p.remove_suffix(1);
  long long quota = 0, period = 0;
  if (q == "max") return 0;
  auto r1 = std::from_chars(q.data(), q.data() + q.size(), quota);
  auto r2 = std::from_chars(p.data(), p.data() + p.size(), period);
  if (r1.ec != std::errc() || r1.ptr != q.data() + q.size() || r2.ec != std::errc() ||
      r2.ptr != p.data() + p.size() || quota <= 0 || period <= 0)
    return 0;
  return static_cast<int>(std::min<long long>((quota + period - 1) / period, 1 << 15));
}

int usableCpus() {
  long conf = std::max(1L, sysconf(_SC_NPROCESSORS_CONF));
  int cpus = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  size_t setBytes = CPU_ALLOC_SIZE(conf);
  if (cpu_set_t* set = CPU_ALLOC(conf)) {
    CPU_ZERO_S(setBytes, set);
    if (sched_getaffinity(0, setBytes, set) == 0) cpus = std::max(1, CPU_COUNT_S(setBytes, set));
    CPU_FREE(set);
  }
  // cgroup v2: "0::/path"; every cgroup from there up to the root may cap the CPU time.
  std::ifstream cg("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(cg, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  while (!path.empty() && path[0] == '/') {
    std::ifstream f("/sys/fs/cgroup" + (path == "/" ? std::string() : path) + "/cpu.max");
    std::string max;
    if (std::getline(f, max))
      if (int q = cpusFromCpuMax(max); q > 0) cpus = std::min(cpus, q);
    if (path == "/") break;
    path = path.substr(0, std::max<size_t>(1, path.rfind('/')));
  }
  return cpus;
}

int rankChannelThreads(const RankInfo& r, int machineNranks) {
  if (r.channelThreads > 0) return r.channelThreads;
  int share = r.cpus;
  if (r.onlineCpus > 0) {
    int perRank = r.onlineCpus / std::max(1, machineNranks);
    share = share > 0 ? std::min(share, perRank) : perRank;
  }
  return share > 0 && share < 2 ? 1 : 0;
}

Topology computeTopology(const std::vector<RankInfo>& table, int myRank) {
  Topology t;
  int n = static_cast<int>(table.size());
  std::map<std::string, int> hostIdx;
  std::vector<int> perHost;
  t.hostOf.resize(n);
  t.localRankOf.resize(n);
  std::map<std::string, int> onMachine;
  for (const auto& r : table) ++onMachine[machineOf(r.hostId)];
  if (myRank >= 0 && myRank < n) t.machineNranks = onMachine[machineOf(table[myRank].hostId)];
  for (int r = 0; r < n; ++r) {
    auto [it, fresh] = hostIdx.emplace(table[r].hostId, static_cast<int>(hostIdx.size()));
    if (fresh) perHost.push_back(0);
    t.hostOf[r] = it->second;
    t.localRankOf[r] = perHost[it->second]++;
  }
  t.nhosts = static_cast<int>(hostIdx.size());
  t.localRank = t.localRankOf[myRank];
  t.localNranks = perHost[t.hostOf[myRank]];
  size_t rails = SIZE_MAX;
  for (const auto& r : table) rails = std::min(rails, r.nics.size());
  t.nrails = std::max<int>(1, rails == SIZE_MAX ? 1 : static_cast<int>(rails));
  int want = table.empty() ? 0 : table[0].nchannels;
  t.nchannels = std::clamp(want > 0 ? want : t.nrails, 1, 16);
  t.homeRailOf.assign(static_cast<size_t>(n), -1);
  for (int r = 0; r < n; ++r)
    if (table[r].homeRail >= 0 && table[r].homeRail < t.nrails) t.homeRailOf[r] = table[r].homeRail;
  t.channelThreads = t.nchannels;
  for (const auto& r : table)
    if (int lim = rankChannelThreads(r, onMachine[machineOf(r.hostId)]); lim > 0)
      t.channelThreads = std::min(t.channelThreads, lim);
  return t;
}

}  // namespace reccl::core
