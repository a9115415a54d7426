// Rendezvous: a root gathers every rank's RankInfo and sends the full table back. Every
// connection starts with a hello carrying the job secret; strangers and foreign jobs are refused
// (closed) without disturbing the ranks that belong.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/wire.h"
#include "reccl/common/deadline.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "transport/socket_util.h"

namespace reccl::core {

struct BootstrapStats {
  std::atomic<uint64_t> refused{0};
};

// Runs the root side in a background thread until every rank got the table or the deadline
// passes. The listening socket is created up front so its address can be handed out.
class BootstrapRoot {
 public:
  // addr/port 0 pick an address/port; `bound` receives the endpoint.
  static Result<std::shared_ptr<BootstrapRoot>> start(uint32_t addr, uint16_t port, uint64_t secret,
                                                      uint64_t commId, Deadline deadline,
                                                      transport::Endpoint* bound);
  // Process-wide count of refused connections (for tests).
  static uint64_t refusedTotal();

 private:
  void run(int nranksHint);
  UniqueFd listen_;
  uint64_t secret_ = 0;
  uint64_t commId_ = 0;
  Deadline deadline_ = Deadline::never();
};

// Client side: connects to the root, sends hello + this rank's info, returns the table.
// makeInfo gets the local address used towards the root (to exclude the bootstrap NIC).
Result<std::vector<RankInfo>> bootstrapExchange(const transport::Endpoint& root, const Hello& hello,
                                                const std::function<Result<RankInfo>(uint32_t localAddr)>& makeInfo,
                                                Deadline deadline);

}  // namespace reccl::core
