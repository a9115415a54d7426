// What the kernel says of RDMA ports in sysfs (/sys/class/infiniband/<dev>/ports/<n>/): the netdev
// a port is bound to, and its counters. Readable without privilege and without libibverbs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace reccl::detector {

inline constexpr const char* kInfinibandSysfs = "/sys/class/infiniband";

// The netdev a port's first GID is bound to (RoCE, iWARP); empty for an InfiniBand port.
std::string rdmaPortNetdev(const std::string& root, const std::string& dev, uint32_t port);

// One port's counters that tell packets lost on its link, as files under its port directory.
// Sequence errors: a responder that received a packet past the one it expected (rxe
// out_of_seq_request, mlx5 out_of_sequence) and a requester that received a sequence NAK (rxe
// rcvd_seq_err, mlx5 packet_seq_err and implied_nak_seq_err). RoCE's reliable connections never
// reorder, so each is a packet lost between the two ends. Timeouts (rxe completer_retry_err,
// mlx5 local_ack_timeout_err) are left out: a responder that is only slow causes them too.
// Packets: the port's packets sent and received (rxe hw_counters sent_pkts/rcvd_pkts, else the
// port's PMA counters port_xmit_packets/port_rcv_packets), for the share; none found: none.
struct RdmaPortCounters {
  std::string dev;
  uint32_t port = 0;
  std::string netdev;
  std::vector<std::string> lossFiles;    // absolute paths
  std::vector<std::string> packetFiles;  // absolute paths; empty: the port counts no packets
};

// Every port under `root` that is bound to a netdev and has at least one sequence-error counter.
std::vector<RdmaPortCounters> listRdmaLossPorts(const std::string& root);

// The sum of the counters in `files`; nullopt when one cannot be read.
std::optional<uint64_t> readCounterSum(const std::vector<std::string>& files);

}  // namespace reccl::detector
