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
// All up IPv4 interfaces of this network namespace.
std::vector<NicInfo> listNics();
// The interface that holds `addr` ("" if none).
std::string nicWithAddress(const std::vector<NicInfo>& nics, uint32_t addr);

// boot id + host name + network namespace inode: ranks with equal identities share memory.
std::string hostIdentity();
std::string hostName();

struct Topology {
  int nhosts = 1;
  std::vector<int> hostOf;     // rank -> host index (first appearance order)
  std::vector<int> localRankOf;
  int localRank = 0;
  int localNranks = 1;
  int nrails = 1;              // NICs every rank has (minimum over ranks)
  int nchannels = 1;
  // Ranks on this rank's machine (same boot id): the hosts of a testbed, containers and network
  // namespaces on one kernel share its CPUs.
  int machineNranks = 1;
};
// Pure. nchannelsWanted from rank 0 (0: one per rail), clamped to [1, 16].
Topology computeTopology(const std::vector<RankInfo>& table, int myRank);
// Threads that run a collective's channels: `wanted` (RECCL_CHANNEL_THREADS) when > 0, else one
// per channel unless this rank's share of the CPUs (its own affinity set, or the machine's online
// CPUs split over its ranks, whichever is less) is one CPU or less: then one, and the channels run
// one after another. On a 2-vCPU machine with one rank per testbed host, parallel channel threads
// cost 8-15 % of the bus bandwidth against running them in turn (docs/benchmarks.md). Clamped to
// [1, nchannels]. Pure.
int channelThreads(int nchannels, int wanted, int affinityCpus, int onlineCpus, int machineNranks);

// The rail a sender uses for a channel: its primary NIC (local rank mod rails) shifted by channel.
inline int railFor(const Topology& t, int senderRank, int channel) {
  return (t.localRankOf[senderRank] + channel) % t.nrails;
}

}  // namespace reccl::core
