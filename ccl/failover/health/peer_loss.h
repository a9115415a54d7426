// Whose retransmits a held DEGRADED rests on: the segments this rank's own connections on the rail
// lose to peers that have the rail up at their end. Pure bookkeeping, table-tested
// (tests/unit/failover/peer_loss_test.cpp); the monitor feeds it and acts on its verdict.
//
// The detector counts retransmits per device, not per destination, so while some peer reports a
// rail down its DEGRADED on that rail is held (gray.h): the retired sockets to that peer
// retransmit for a while, whatever the rail does. But those sockets are no longer any
// connection's path. The connections still on the rail go to peers whose end of it is up, and
// their own transport counts what they lose (TCP_INFO: retransmitted less D-SACK duplicates, of
// the data segments sent; transport::LossSample). When those losses alone meet the detector's
// rule (bpf/link_detector.bpf.c: RECCL_RETRANS_THRESHOLD lost in the running window and
// RECCL_RETRANS_RATE of the segments sent, by more than chance; or, for a thin link, the same over
// the windows of its pool), the peer's fault does not explain the DEGRADED: it is a gray failure
// of the rail's own, routed around now instead of once the peer's rail is back. A transport that
// keeps no such count (a QP) gives no evidence, and the hold stays.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace reccl::failover {

struct LossRule {
  uint64_t threshold = 12;  // RECCL_RETRANS_THRESHOLD: lost segments, at least
  uint64_t ratePpm = 3000;  // RECCL_RETRANS_RATE (per mille) in ppm; 0: the count alone, no pool
  bool pool = true;         // RECCL_RETRANS_POOL > 0: a thin link's windows are pooled
};

struct LossCount {
  uint64_t lost = 0;
  uint64_t sent = 0;
};

// The detector's rate test on one set of sums (its lost_rate_crossed): the lost share of the
// segments sent reaches the rate, and the lost count exceeds what the rate allows by three
// standard deviations of a count (excess^2 >= 9 lost), so that a clump of retransmits early in a
// window is not a rate.
bool lostRateCrossed(const LossCount& c, uint64_t ratePpm) noexcept;
// One window: the count, and the rate test unless it is off.
bool windowIsGray(const LossCount& c, const LossRule& rule) noexcept;
// `windows` windows' sums pooled: only for a thin link (fewer segments a window on average than
// the count needs at the rate), never without the rate test; the count over them and the test.
bool poolIsGray(const LossCount& c, int windows, const LossRule& rule) noexcept;

// One rail's losses on its peers' connections, per peer, in windows of windowNs; the running
// window is judged alone, the last `windows` of them pooled. A path counts from its first sample
// on (what it lost before is not this evidence); a path not seen in a sample round is forgotten.
// Which peers are witnesses is decided when judging: a peer that has told of a fault of its own
// since its losses were counted is left out of them.
class PeerLossWindows {
 public:
  using Witness = std::function<bool(int peer)>;

  PeerLossWindows(uint64_t windowNs, int windows);

  // Starts a sample round at nowNs: the windows it passed are emptied.
  void beginRound(uint64_t nowNs);
  // One connection's cumulative counters on its path (pathId), to `peer`.
  void add(uint64_t pathId, int peer, uint64_t lost, uint64_t sent);
  // Ends the round: paths not added in it are forgotten.
  void endRound();

  // The witnesses' sums (counters that fell back, a late D-SACK, count as such; never below 0):
  // the running window, and every kept window with how many hold anything.
  LossCount running(const Witness& w) const;
  LossCount kept(const Witness& w, int* windows = nullptr) const;
  // windowIsGray on the running window; one under the count, poolIsGray on the kept ones (a
  // window that reaches the count is judged alone, as the detector does).
  bool gray(const LossRule& rule, const Witness& w) const;
  // The witnesses whose connections lost segments (net) in the kept windows, in rank order.
  std::vector<int> losingPeers(const Witness& w) const;
  void reset();

 private:
  struct PeerSums {
    int peer;
    int64_t lost = 0;
    int64_t sent = 0;
  };
  struct Window {
    uint64_t index = 0;  // nowNs / windowNs + 1 when it was last written (0: never)
    std::vector<PeerSums> peers;
  };
  struct Seen {
    uint64_t lost = 0;
    uint64_t sent = 0;
    bool inRound = false;
  };
  struct Net {
    int64_t lost = 0;
    int64_t sent = 0;
    LossCount count() const noexcept;  // never below 0
  };
  bool live(const Window& w) const noexcept { return w.index != 0 && w.index + windows_.size() > index_; }
  static Net sums(const Window& w, const Witness& witness, bool* any);

  uint64_t windowNs_;
  std::vector<Window> windows_;
  uint64_t index_ = 0;  // the round's window
  std::unordered_map<uint64_t, Seen> paths_;
};

}  // namespace reccl::failover
