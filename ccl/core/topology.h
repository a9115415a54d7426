// Which NICs a rank uses, which ranks share a host, and which rail each channel takes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/wire.h"
#include "reccl/common/status.h"

namespace reccl::core {

// NCCL list syntax: "rail0,rail1" (prefixes), "^mgmt0,lo" (exclude), "=rail0" (exact names),
// "^=lo" (exclude exact).
struct NicFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
};
NicFilter parseNicFilter(std::string_view spec);
bool nicMatches(const NicFilter& f, std::string_view name);

// Pure: picks the NICs to use from all IPv4 interfaces that are up. With a spec, the filter
// decides. Without one: everything but loopback and the bootstrap NIC, when anything is left;
// else the bootstrap NIC; else loopback. Sorted by name so rails line up across hosts.
std::vector<NicInfo> selectNics(std::vector<NicInfo> all, std::string_view spec, std::string_view bootstrapNic);
// Pure: the index of the NIC named `name` in `nics`, -1 when none is.
int nicIndex(const std::vector<NicInfo>& nics, std::string_view name);
// All up IPv4 interfaces of this network namespace.
std::vector<NicInfo> listNics();
// The interface that holds `addr` ("" if none).
std::string nicWithAddress(const std::vector<NicInfo>& nics, uint32_t addr);

// boot id + host name + network namespace inode: ranks with equal identities share memory.
std::string hostIdentity();
std::string hostName();
// The machine part of a host identity: its boot id (the whole identity when that is missing).
// Hosts of a testbed, containers and network namespaces on one kernel are one machine.
std::string machineOf(const std::string& hostId);
// CPUs this process may use: its affinity set, capped by the CPU quota (cpu.max) of its cgroup
// and the cgroups above it (cgroup v2); at least 1.
int usableCpus();
// Pure: the CPUs a cgroup v2 cpu.max line ("QUOTA PERIOD" or "max PERIOD") allows, rounded up;
// 0 for no limit or an unreadable line.
int cpusFromCpuMax(std::string_view line);

struct Topology {
  int nhosts = 1;
  std::vector<int> hostOf;     // rank -> host index (first appearance order)
  std::vector<int> localRankOf;
  int localRank = 0;
  int localNranks = 1;
  int nrails = 1;              // NICs every rank has (minimum over ranks)
  int nchannels = 1;
  // Ranks of this communicator on this rank's machine (machineOf): they share its CPUs.
  int machineNranks = 1;
  // Threads that run a collective's channels, the same on every rank: the smallest over the ranks
  // of rankChannelThreads (nchannels when none limits it). Equal on all ranks, so that no rank
  // runs its channels in turn while its peers run them at once (their channel k would wait for
  // its channels 0..k-1, against a per-wait deadline).
  int channelThreads = 1;
  // rank -> the rail its channels start on when it sends (RankInfo::homeRail; -1 where it has
  // none or its home is past the rails every rank has: primaryRail then takes its local rank's).
  std::vector<int> homeRailOf;
};
// Pure. nchannelsWanted from rank 0 (0: one per rail), clamped to [1, 16].
Topology computeTopology(const std::vector<RankInfo>& table, int myRank);
// Pure: the channel threads rank `r` asks for, 0 for one per channel. Its RECCL_CHANNEL_THREADS
// when set; else 1 when its share of the CPUs is less than two (its usable CPUs, or its machine's
// online CPUs over the communicator's ranks there, whichever is less; unknown counts are left
// out), so that its channels run one after another; else 0. On the 2-vCPU testbed (one rank per
// host, both on one machine) two channel threads per rank cost 8-15 % of the bus bandwidth
// against one (docs/results/fault-bench.md, 2026-12-01 09:57).
int rankChannelThreads(const RankInfo& r, int machineNranks);

// A rank's own rail: its home rail (RankInfo::homeRail), else its local rank mod rails.
inline int primaryRail(const Topology& t, int rank) {
  const int home = static_cast<size_t>(rank) < t.homeRailOf.size() ? t.homeRailOf[rank] : -1;
  return home >= 0 ? home : t.localRankOf[rank] % t.nrails;
}

// The rail a sender uses for a channel: its own rail shifted by channel. Both ends compute it
// from the one table.
inline int railFor(const Topology& t, int senderRank, int channel) {
  return (primaryRail(t, senderRank) + channel) % t.nrails;
}

}  // namespace reccl::core
