// The TCP transport's path factory (transport/path_factory.h): links are TCP connections from
// this rank's NIC on a rail to the peer's NIC on that rail and its data listener, made into
// SocketSendPath / SocketRecvPath on the communicator's socket engine. Everything TCP-specific a
// failover needs lives here and in tcp_health.h: socket options, keepalive, TCP_INFO, the reset
// of a connection on a dead link, closing an idle standby without a FIN.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/path_factory.h"
#include "transport/socket_engine.h"

namespace reccl::transport {

struct SocketPathFactoryConfig {
  SocketEngine* engine = nullptr;              // outlives the factory and every path it made
  std::vector<std::string> nicName;            // this rank's NIC per rail
  std::vector<uint32_t> nicAddr;               // IPv4, network order, per rail
  std::vector<std::vector<uint32_t>> peerNic;  // rank -> rail -> IPv4
  std::vector<uint16_t> peerPort;              // rank -> data listener port
  // SO_PRIORITY of every link (0: none) and of the path made of it until a step posted after
  // the move is acknowledged (RECCL_FAILOVER_SOCKET_PRIORITY).
  int linkPriority = 0;
};

class SocketPathFactory final : public PathFactory {
 public:
  explicit SocketPathFactory(SocketPathFactoryConfig cfg) : cfg_(std::move(cfg)) {}
  const char* name() const noexcept override { return "tcp"; }
  Result<std::unique_ptr<Link>> connect(int peer, int rail, Deadline deadline) override;
  std::unique_ptr<Link> accept(UniqueFd fd) override;
  int railOf(const channel::Path& path) const override;
  void watch(const channel::Path& path, int64_t stallMs) const override;
  PathSample sample(const channel::Path& path, int64_t stallMs) const override;
  LossSample loss(const channel::Path& path) const override;

 private:
  SocketPathFactoryConfig cfg_;
};

}  // namespace reccl::transport
