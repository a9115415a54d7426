// Whose retransmits a held DEGRADED rests on: the segments this rank's own connections on the rail
// lose to peers that have the rail up at their end. Pure bookkeeping, table-tested
// (tests/unit/failover/peer_loss_test.cpp); the monitor feeds it and acts on its verdict.
//
// The detector counts retransmits per device, not per destination, so while some peer reports a
// rail down its DEGRADED on that rail is held (gray.h): the retired sockets to that peer
// retransmit for a while, whatever the rail does. But those sockets are no longer any
// connection's path. The connections still on the rail go to peers whose end of it is up, and
// their own transport counts what they lose (TCP_INFO: retransmitted less D-SACK duplicates, of
// the data segments sent; transport::LossSample). When those losses alone cross the detector's
// rule (RECCL_RETRANS_THRESHOLD lost segments, and RECCL_RETRANS_RATE per mille of those sent,
// over the span the detector's evidence reaches), the peer's fault does not explain the DEGRADED:
// it is a gray failure of the rail's own, routed around now instead of once the peer's rail is
// back. A transport that keeps no such count (a QP) gives no evidence, and the hold stays.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace reccl::failover {

struct LossRule {
  uint64_t threshold = 12;  // RECCL_RETRANS_THRESHOLD: lost segments, at least
  uint64_t perMille = 3;    // RECCL_RETRANS_RATE: of the segments sent (0: the count alone)
};

struct LossCount {
  uint64_t lost = 0;
  uint64_t sent = 0;
};

// The count and the share, as the detector judges one device's window.
bool lossIsGray(const LossCount& c, const LossRule& rule) noexcept;

// One rail's losses on its healthy peers' connections, in windows of windowNs; the last `windows`
// of them are judged together. A path counts from its first sample on (what it lost before the
// hold began is not this fault's evidence); a path not seen in a sample round is forgotten.
class PeerLossWindows {
 public:
  PeerLossWindows(uint64_t windowNs, int windows);

  // Starts a sample round at nowNs: the windows it passed are emptied.
  void beginRound(uint64_t nowNs);
  // One connection's cumulative counters on its path (pathId), to `peer`.
  void add(uint64_t pathId, int peer, uint64_t lost, uint64_t sent);
  // Ends the round: paths not added in it are forgotten.
  void endRound();
  // Over the kept windows (counters that fell back, a late D-SACK, count as such; never below 0).
  LossCount sum() const;
  // The peers whose connections lost segments in the kept windows, in rank order.
  std::vector<int> losingPeers() const;
  void reset();

 private:
  struct Window {
    uint64_t index = 0;  // nowNs / windowNs when it was last written (0: never)
    int64_t lost = 0;
    int64_t sent = 0;
    std::vector<int> peers;  // lost segments here
  };
  struct Seen {
    uint64_t lost = 0;
    uint64_t sent = 0;
    bool inRound = false;
  };
  Window& current();

  uint64_t windowNs_;
  std::vector<Window> windows_;
  uint64_t index_ = 0;  // the round's window
  std::unordered_map<uint64_t, Seen> paths_;
};

}  // namespace reccl::failover
