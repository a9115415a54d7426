// Gray failures that a known fault explains: pure decisions, table-tested
// (tests/unit/failover/health_decisions_test.cpp).
//
// A DEGRADED from the retransmit detector says "segments on this device go unacknowledged". A
// hard fault at the far end of the rail (the peer's cable pulled) says the same while it lasts
// and a little after (backed-off retransmissions, FINs of the sockets migration closed), so a
// DEGRADED then carries no news: the peer has told us the rail is down at its end (every
// migration request and reply carries its railsUp), and nothing of ours to it uses the rail.
// Acting on it would take the rail out here for the whole degraded clear time
// (RECCL_DEGRADED_CLEAR_MS, 5 s), and the next fault, on the other rail, would find no rail left.
// The rule: retransmits count as a gray failure only while the rail is believed healthy at both
// ends. A DEGRADED on rail r is held, not acted on, while any peer reports r down and for as
// long as the detector's evidence reaches back after the first report that has it up again (a
// fail-back's request or reply): the retransmits counted before and just after the far end came
// back (the same after this end's own hard fault on r: the sockets that backed off resume once
// the link is back). Likewise after a fail-back or rebalance moved connections off r while r was
// healthy at both ends: the sockets it retired close with data in flight. The evidence reaches
// back two retransmit windows (RECCL_RETRANS_WINDOW_MS), or, where the detector pools closed
// windows for thin links (RECCL_RETRANS_POOL), the pool's windows and the running one: a pooled
// DEGRADED can rest on the fault's own windows for that long. An RDMA port's DEGRADED (its
// sequence-error counters, docs/detector.md) rests on one sliding window (RECCL_RDMA_LOSS_WINDOW_MS),
// or pooled on RECCL_RDMA_LOSS_POOL of them, and the sample before it; the longer of the two
// reaches.
// Held, not dropped: the detector keeps a rail degraded while retransmits go on and clears it the
// clear time after the last one; still degraded that long after the explanation ended means the
// retransmits went on with both ends healthy, a real gray failure, routed around then (late by
// the clear time). A held DEGRADED that clears costs the rail nothing: no migration, no hold-down.
// While the only explanation is a peer's (its rail down, or its report within the evidence's
// reach), the connections still on the rail, all to peers with it up, say whose retransmits they
// are: when they lose segments at the detector's rule, the DEGRADED is the rail's own and acts at
// once (peer_loss.h). Without such counts (an RDMA port's QPs) a real gray failure on r that
// starts while another peer's r is down is seen only once that fault is over.
// The rule sits in the library, not in the detector: only the communicator knows what its peers
// reported, and it covers the in-process detector and the node daemon alike.
#pragma once

#include <cstdint>

namespace reccl::failover {

// What is known about one rail when a DEGRADED comes (CLOCK_MONOTONIC ns; 0: never).
struct GrayFacts {
  uint64_t nowNs = 0;
  uint64_t windowNs = 0;       // how far back the detector's evidence reaches (see above)
  uint64_t peerReportNs = 0;   // a peer last reported the rail down, or up again after down
  uint64_t leftNs = 0;         // a fail-back or rebalance last moved connections off the healthy rail
  uint64_t upHereNs = 0;       // the rail last came back up here after a hard fault
  bool downAtAPeer = false;    // some peer's last report has the rail down
};
// True when the retransmits of a known hard fault or move explain a DEGRADED on the rail.
bool grayExplained(const GrayFacts& f) noexcept;
// True when what explains it is a peer's fault alone (nothing of this end's own: its hard fault
// just over, or a move off the rail): the connections to the other peers can tell.
bool onlyAPeerExplainsGray(const GrayFacts& f) noexcept;

// A held DEGRADED whose explanation ended at explainedNs: the detector's clear (and its LinkUp,
// which ends the hold) is due by then + clearNs; still held a quarter second after that, it is a
// real gray failure to route around now.
bool heldGrayIsReal(uint64_t nowNs, uint64_t explainedNs, uint64_t clearNs) noexcept;

}  // namespace reccl::failover
