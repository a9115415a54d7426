// What a TCP connection says about the path under it: TCP_INFO, read for the failover's stall
// check and rail meter (PathFactory::sample), the keepalive that makes an idle connection's
// death show there, and an idle standby's liveness. The stall verdict is a pure function.
#pragma once

#include <cstdint>

namespace reccl::transport {

// The fields of TCP_INFO the verdicts read.
struct TcpSample {
  bool ok = false;           // getsockopt(TCP_INFO) answered
  bool established = false;
  uint32_t unacked = 0;      // segments in flight
  uint32_t lastAckRecvMs = 0;  // since the last ACK from the peer
  uint32_t backoff = 0;      // RTO backoffs of the segment in flight
  uint32_t retransmits = 0;
  uint32_t probes = 0;       // keepalive (or zero-window) probes unanswered
  uint64_t bytesAcked = 0;
  uint64_t bytesReceived = 0;
  bool lossCounted = false;   // the kernel's TCP_INFO has the three counts below (4.19 on)
  uint32_t totalRetrans = 0;  // segments retransmitted over the connection's life
  uint32_t dsackDups = 0;     // of those, the ones the receiver reported as duplicates (D-SACK)
  uint32_t dataSegsOut = 0;   // data segments sent, retransmits included
};
TcpSample sampleTcp(int fd) noexcept;

// The keepalive idle time armKeepalive sets for a stall time: its whole seconds, at least 1.
uint32_t keepaliveIdleMs(int64_t stallMs) noexcept;

// Pure: data or keepalive probes outstanding and no ACK for the stall time mean a dead path,
// whichever end of it failed (a slow peer still ACKs at the TCP level). The last ACK of a
// connection that was idle is old before anything is lost: data counts only once a
// retransmission timeout fired unanswered, a keepalive probe only once it has waited the stall
// time (it goes out after the keepalive idle time). Otherwise an idle connection that had just
// sent (or probed) would look stalled and be migrated, or failed when no other rail is left.
bool tcpStalled(const TcpSample& s, int64_t stallMs) noexcept;

// Keepalive probes make an idle connection's dead path visible to the stall check (after the
// stall time's whole seconds, then every second); the kernel itself never gives up on it (the
// failover decides, within RECCL_FAILOVER_TIMEOUT_MS).
void armKeepalive(int fd, int64_t stallMs) noexcept;
// An idle standby has nothing in flight, so only keepalive can tell that it died: probe after
// 1 s idle, every 1 s, give up after 3 unanswered (the kernel then errors the socket, ~4 s).
void armIdleKeepalive(int fd) noexcept;
// An idle socket that shows anything (data, EOF, error) or left ESTABLISHED is no longer usable.
bool idleSocketAlive(int fd) noexcept;

}  // namespace reccl::transport
