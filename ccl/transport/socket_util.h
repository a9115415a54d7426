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
// Connects to dst, optionally from a local address and bound to a device (SO_BINDTODEVICE needs
// CAP_NET_RAW; without it the source-address bind still pins the NIC on a routed setup). Retries
// refused connections until the deadline (the peer may not listen yet).
Result<UniqueFd> connectTcp(const Endpoint& dst, uint32_t srcAddr, const std::string& device, Deadline deadline);
// Accepts one connection (poll with the deadline).
Result<UniqueFd> acceptTcp(int listenFd, Deadline deadline);

Status sendAll(int fd, std::span<const std::byte> data, Deadline deadline);
Status recvAll(int fd, std::span<std::byte> data, Deadline deadline);

// TCP_NODELAY and large socket buffers for data connections.
void tuneDataSocket(int fd, const std::string& device) noexcept;

}  // namespace reccl::transport
