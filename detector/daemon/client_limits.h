// What one connection may cost reccl-detectord. Any local member of the daemon's group may
// connect, so no client may be able to slow the daemon down for the others: each is bounded in
// links, request size and rate, pending output, connections per user; the loop serves a bounded
// number of its requests per wake-up.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "reccl/common/status.h"

namespace reccl::detector {

struct ClientLimits {
  size_t maxWatches = 64;        // links one client watches at once (a node has a few NICs)
  double requestsPerSec = 100;   // sustained rate; a job sends a handful, then a ping per 500 ms
  double requestBurst = 200;     // requests at once (the token bucket's depth)
  int maxClientsPerUid = 64;     // connections of one user at once
  int maxClients = 512;          // all connections at once
  int sendBufferBytes = 256 * 1024;  // pending output; a client that lets it fill is dropped
  int requestsPerWakeup = 16;    // requests read from one client before the others get a turn

  Status validate() const {
    if (maxWatches < 1) return Status(Errc::kInvalidArgument, "max-watches-per-client: must be >= 1");
    if (!(requestsPerSec > 0)) return Status(Errc::kInvalidArgument, "max-requests-per-sec: must be > 0");
    if (requestBurst < 1) return Status(Errc::kInvalidArgument, "request burst: must be >= 1");
    if (maxClientsPerUid < 1) return Status(Errc::kInvalidArgument, "max-clients-per-uid: must be >= 1");
    if (maxClients < 1) return Status(Errc::kInvalidArgument, "max-clients: must be >= 1");
    if (sendBufferBytes < 4096) return Status(Errc::kInvalidArgument, "send buffer: must be >= 4096 bytes");
    if (requestsPerWakeup < 1) return Status(Errc::kInvalidArgument, "requests per wake-up: must be >= 1");
    return Status::Ok();
  }
};

// A token bucket over an injected monotonic clock: take() is false once a client is over its
// sustained rate after its burst.
class RequestBudget {
 public:
  RequestBudget(double perSec, double burst, uint64_t nowNs)
      : perSec_(perSec), burst_(burst), tokens_(burst), lastNs_(nowNs) {}
  bool take(uint64_t nowNs) {
    if (nowNs > lastNs_) {
      tokens_ = std::min(burst_, tokens_ + static_cast<double>(nowNs - lastNs_) * perSec_ / 1e9);
      lastNs_ = nowNs;
    }
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

 private:
  double perSec_, burst_, tokens_;
  uint64_t lastNs_;
};

}  // namespace reccl::detector
