// Blocking socket helpers with deadlines, used for connection set-up (hello exchange, bootstrap).
// Data moves through the SocketEngine, never through these.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <span>
#include <string>

#include "reccl/common/deadline.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "transport/byte_io.h"

namespace reccl::transport {

struct Endpoint {
  uint32_t addr = 0;  // IPv4, network byte order
  uint16_t port = 0;  // host byte order
  std::string str() const;
};

Result<uint32_t> parseIpv4(const std::string& text);
// Resolves a host name or dotted quad to IPv4.
Result<uint32_t> resolveIpv4(const std::string& host);

// A listening TCP socket on addr:port (port 0 picks one); returns the bound endpoint in *bound.
Result<UniqueFd> listenTcp(uint32_t addr, uint16_t port, Endpoint* bound);
// What a refused connect means. kRetry: the peer may not listen yet (set-up), so dial again until
// the deadline. kFinal: the peer listens from its set-up until it is destroyed (failover's
// connects), so a refusal (its kernel's reset: nothing listens there) means its process exited or
// its communicator is gone, and no retry can help: Errc::kPeerFailure at once. A dead link never
// refuses; its SYNs go unanswered.
enum class OnRefused { kRetry, kFinal };

// Connects to dst, optionally from a local address and bound to a device (SO_BINDTODEVICE needs
// CAP_NET_RAW; without it the source-address bind still pins the NIC on a routed setup). A
// refusal, or a connection that opened onto itself (nothing listens either), as `onRefused`
// says; dials anew when an attempt is not answered within kConnectAttemptMs (then twice that, up
// to kConnectAttemptMaxMs), so a lost SYN costs that, not the kernel's 1 s RTO.
inline constexpr int kConnectAttemptMs = 200;
inline constexpr int kConnectAttemptMaxMs = 1600;
Result<UniqueFd> connectTcp(const Endpoint& dst, uint32_t srcAddr, const std::string& device, Deadline deadline,
                            OnRefused onRefused = OnRefused::kRetry);
// Accepts one connection (poll with the deadline).
Result<UniqueFd> acceptTcp(int listenFd, Deadline deadline);

Status sendAll(int fd, std::span<const std::byte> data, Deadline deadline);
Status recvAll(int fd, std::span<std::byte> data, Deadline deadline);
// sendAll / recvAll on `fd` as a byte stream.
ByteIo socketIo(int fd, Deadline deadline);

// TCP_NODELAY and large socket buffers for data connections.
void tuneDataSocket(int fd, const std::string& device) noexcept;
// SO_PRIORITY `prio` (0-6 need no privilege): the priority the socket's packets take from their
// next transmission on, retransmissions included. False when refused.
bool setSocketPriority(int fd, int prio) noexcept;

// Drops a TCP connection on the spot (connect(AF_UNSPEC): tcp_disconnect): its unacknowledged
// data and FIN are purged, so the kernel stops retransmitting them. shutdown() alone leaves a
// socket on a dead link retransmitting for seconds (RTO backoff), and those retransmissions read
// as a DEGRADED rail to a retransmit-counting detector after the link is back, which moves
// everything off the repaired rail and leaves the next fault on it nothing to move. Errors are of
// no interest: the socket is being retired.
void abortTcp(int fd) noexcept;
// Closes an idle socket with a reset (SO_LINGER 0) rather than a FIN: on a dead link the kernel
// would retransmit the FIN for seconds, which a retransmit-counting detector counts against the
// rail once it is back. Only for a socket that holds no data.
void closeAbruptly(UniqueFd& fd) noexcept;

}  // namespace reccl::transport
