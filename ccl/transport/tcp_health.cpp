#include "transport/tcp_health.h"

#include <linux/tcp.h>  // tcp_info with bytes_acked/bytes_received (glibc's copy lacks them)
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>

namespace reccl::transport {
namespace {
constexpr uint8_t kTcpEstablished = 1;  // TCP_ESTABLISHED (netinet/tcp.h, which clashes with linux/tcp.h)
}

TcpSample sampleTcp(int fd) noexcept {
  TcpSample s;
  tcp_info ti{};
  socklen_t len = sizeof(ti);
  if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return s;
  s.ok = true;
  s.established = ti.tcpi_state == kTcpEstablished;
  s.unacked = ti.tcpi_unacked;
  s.lastAckRecvMs = ti.tcpi_last_ack_recv;
  s.backoff = ti.tcpi_backoff;
  s.retransmits = ti.tcpi_retransmits;
  s.probes = ti.tcpi_probes;
  s.bytesAcked = ti.tcpi_bytes_acked;
  s.bytesReceived = ti.tcpi_bytes_received;
  s.lossCounted = len >= offsetof(tcp_info, tcpi_dsack_dups) + sizeof(ti.tcpi_dsack_dups);
  s.totalRetrans = ti.tcpi_total_retrans;
  s.dsackDups = ti.tcpi_dsack_dups;
  s.dataSegsOut = ti.tcpi_data_segs_out;
  return s;
}

uint32_t keepaliveIdleMs(int64_t stallMs) noexcept {
  return static_cast<uint32_t>(std::max<int64_t>(1, stallMs / 1000) * 1000);
}

bool tcpStalled(const TcpSample& s, int64_t stallMs) noexcept {
  if (!s.ok || !s.established) return false;
  const uint32_t stall = static_cast<uint32_t>(stallMs);
  bool dataStalled = s.unacked > 0 && s.lastAckRecvMs >= stall && (s.backoff > 0 || s.retransmits > 0);
  bool probeStalled = s.probes > 0 && s.lastAckRecvMs >= keepaliveIdleMs(stallMs) + stall;
  return dataStalled || probeStalled;
}

void armKeepalive(int fd, int64_t stallMs) noexcept {
  int one = 1, idle = static_cast<int>(keepaliveIdleMs(stallMs) / 1000), intvl = 1, cnt = 1000;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

void armIdleKeepalive(int fd) noexcept {
  int one = 1, idle = 1, intvl = 1, cnt = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

bool idleSocketAlive(int fd) noexcept {
  pollfd pf{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&pf, 1, 0) != 0) return false;
  TcpSample s = sampleTcp(fd);
  return s.ok && s.established;
}

}  // namespace reccl::transport
