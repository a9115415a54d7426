// The relay's side of relayed connections: a same-host rank asks this rank (over an abstract
// unix socket in the host's network namespace) to forward one of its connections; this rank
// connects from its own NIC on a healthy rail to the peer's NIC on that rail and then copies
// bytes unchanged between the shared-memory pipe and that TCP connection, one thread per pipe.
// It never parses what it forwards: the origin and the peer run the ordinary migration
// handshake and step protocol end to end, so exactly-once holds without the relay's help.
//
// A pipe ends when the origin closes its control socket (its path retired or its process gone),
// when the peer closes the TCP connection, when this rank's rail goes down (breakRail), or when
// the communicator stops; the origin then migrates the connection again.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/auth.h"
#include "failover/migration/migrate_wire.h"
#include "failover/relay/relay_pipe.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::failover {

struct RelayServerConfig {
  int rank = 0;
  int nranks = 0;
  core::Key key{};  // the communicator's: a relay request proves it
  uint64_t commId = 0;
  uint32_t pid = 0;
  std::vector<int> hostOf;                    // rank -> host index
  std::vector<std::string> nicName;           // this rank's NIC per rail
  std::vector<uint32_t> nicAddr;              // IPv4, network order
  std::vector<std::vector<uint32_t>> peerNic; // rank -> rail -> IPv4
  std::vector<uint16_t> peerPort;             // rank -> data port
  std::function<bool(int)> railUp;            // this rank's rail health (monitor)
  std::function<uint64_t()> railsUp;
  std::function<bool()> broken;               // communicator failed
};

class RelayServer {
 public:
  static Result<std::unique_ptr<RelayServer>> create(RelayServerConfig cfg);
  ~RelayServer();
  RelayServer(const RelayServer&) = delete;
  RelayServer& operator=(const RelayServer&) = delete;

  // The abstract unix socket name of `rank`'s relay (pid + communicator keep jobs apart).
  static std::string socketName(uint32_t pid, uint64_t commId, int rank);
  // This rank's NIC on `rail` went down: every pipe forwarded over it breaks (the origins move on).
  void breakRail(int rail);
  // Stops accepting; waits up to drainMs for the origins to close their pipes (their last steps
  // may still be travelling through here), then ends every pipe.
  void stop(int64_t drainMs);

  uint64_t bytesForwarded() const noexcept { return bytes_.load(std::memory_order_relaxed); }
  uint64_t pipesServed() const noexcept { return served_.load(std::memory_order_relaxed); }

 private:
  struct Forward {
    RelayPipe pipe;
    UniqueFd ctrl;
    UniqueFd tcp;
    int rail = 0;
    int origin = -1;
    ConnId conn;
    std::atomic<bool> breakReq{false};
    std::atomic<bool> done{false};
    std::thread thread;
  };

  explicit RelayServer(RelayServerConfig cfg) : cfg_(std::move(cfg)) {}
  void acceptLoop();
  void serve(UniqueFd ctrl);
  void forward(Forward& f);
  void reap(bool all);

  RelayServerConfig cfg_;
  UniqueFd listen_;
  UniqueFd stopEvent_;
  std::thread acceptor_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::list<std::unique_ptr<Forward>> forwards_;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> served_{0};
};

}  // namespace reccl::failover
