// Whose retransmits a held DEGRADED rests on (failover/health/peer_loss.h): the detector's rule
// on the losses of the connections to peers that have the rail up, over its evidence's span.
#include "failover/health/peer_loss.h"

#include "failover/health/rail_state.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace reccl::failover {
namespace {

constexpr uint64_t kMs = 1'000'000ull;

// The detector's rule (bpf/link_detector.bpf.c: lost_rate_crossed, pooled_crossed), on one
// window and on a thin link's pooled windows.
TEST(PeerLoss, TheDetectorsRule) {
  const LossRule rule{12, 3000};  // the defaults: 12 lost, 3 per mille
  const LossRule countOnly{12, 0};
  struct Case {
    std::string name;
    LossCount count;
    int windows;  // 1: one window (windowIsGray); more: pooled (poolIsGray)
    LossRule rule;
    bool gray;
  };
  const std::vector<Case> cases = {
      {"nothing lost", {0, 100000}, 1, rule, false},
      {"under the count", {11, 100}, 1, rule, false},
      {"the count at a high share", {12, 100}, 1, rule, true},
      {"the count at exactly the share: no excess over chance", {12, 4000}, 1, rule, false},
      {"a clump a few over the allowance", {20, 4000}, 1, rule, false},
      {"1 % of a busy window", {180, 18000}, 1, rule, true},
      {"the count alone when the share is off", {12, 1'000'000}, 1, countOnly, true},
      {"a zero threshold still needs one lost segment", {0, 0}, 1, {0, 0}, false},
      {"a thin link's pool", {20, 1000}, 3, rule, true},
      {"a thin link's pool under the count", {11, 300}, 3, rule, false},
      {"a thin link's pool at a low share", {13, 5000}, 3, rule, false},
      {"a busy link is never pooled", {200, 20000}, 2, rule, false},
      {"no pool without the share", {200, 1000}, 3, countOnly, false},
      {"no pool with RECCL_RETRANS_POOL=0", {20, 1000}, 3, {12, 3000, false}, false},
      {"a thin window alone, judged as one", {20, 1000}, 1, rule, true},
  };
  for (const auto& c : cases) {
    const bool got = c.windows == 1 ? windowIsGray(c.count, c.rule) : poolIsGray(c.count, c.windows, c.rule);
    EXPECT_EQ(got, c.gray) << c.name;
  }
  EXPECT_FALSE(poolIsGray({20, 1000}, 1, rule)) << "a pool of one window";
}

// One sample round: each path's cumulative counters.
struct Reading {
  uint64_t pathId;
  int peer;
  uint64_t lost, sent;
};
void round(PeerLossWindows& w, uint64_t nowNs, std::initializer_list<Reading> readings) {
  w.beginRound(nowNs);
  for (const Reading& r : readings) w.add(r.pathId, r.peer, r.lost, r.sent);
  w.endRound();
}

const PeerLossWindows::Witness kAll = [](int) { return true; };

TEST(PeerLoss, APathCountsFromItsFirstSampleAndAGoneOneIsForgotten) {
  PeerLossWindows w(500 * kMs, 3);
  const uint64_t t0 = 10'000 * kMs;
  // First round: baselines only, whatever the path lost before.
  round(w, t0, {{1, 2, 500, 10'000}, {2, 3, 7, 900}});
  EXPECT_EQ(w.kept(kAll).lost, 0u);
  EXPECT_EQ(w.kept(kAll).sent, 0u);
  // Path 1 loses 10 of 200 more; path 2 nothing.
  round(w, t0 + 100 * kMs, {{1, 2, 510, 10'200}, {2, 3, 7, 1'000}});
  EXPECT_EQ(w.kept(kAll).lost, 10u);
  EXPECT_EQ(w.kept(kAll).sent, 300u);
  EXPECT_EQ(w.losingPeers(kAll), std::vector<int>{2});
  // Path 1 is gone (its connection moved); a new path of the same peer starts from its own
  // counters, not from path 1's.
  round(w, t0 + 200 * kMs, {{2, 3, 9, 1'100}, {3, 2, 4, 50}});
  EXPECT_EQ(w.kept(kAll).lost, 12u);
  EXPECT_EQ(w.kept(kAll).sent, 400u);
  EXPECT_EQ(w.losingPeers(kAll), (std::vector<int>{2, 3}));
  // Path 1 back under the same id: a first sample again.
  round(w, t0 + 300 * kMs, {{1, 2, 900, 20'000}});
  EXPECT_EQ(w.kept(kAll).lost, 12u);
}

TEST(PeerLoss, OnlyTheKeptWindowsCountAndLateDuplicatesTakeBack) {
  PeerLossWindows w(500 * kMs, 2);  // a second of evidence
  auto at = [&](uint64_t nowNs, uint64_t lost, uint64_t sent) { round(w, nowNs, {{7, 1, lost, sent}}); };
  at(100 * kMs, 0, 0);
  at(200 * kMs, 20, 1'000);  // window 0
  EXPECT_EQ(w.kept(kAll).lost, 20u);
  at(600 * kMs, 25, 2'000);  // window 1
  EXPECT_EQ(w.kept(kAll).lost, 25u);
  // A D-SACK that came late takes back retransmits the receiver had: the counter falls.
  at(700 * kMs, 22, 2'100);
  EXPECT_EQ(w.kept(kAll).lost, 22u);
  // Window 2: window 0 is out of the span.
  at(1'100 * kMs, 22, 2'200);
  EXPECT_EQ(w.kept(kAll).lost, 2u);
  EXPECT_EQ(w.kept(kAll).sent, 1'200u);
  // A long quiet: nothing left.
  at(5'000 * kMs, 22, 2'300);
  EXPECT_EQ(w.kept(kAll).lost, 0u);
  EXPECT_EQ(w.kept(kAll).sent, 100u);
  EXPECT_TRUE(w.losingPeers(kAll).empty());
  // A 32-bit counter that wrapped counts from there, not as a huge negative.
  at(5'100 * kMs, 1, 10);
  EXPECT_EQ(w.kept(kAll).sent, 100u);
  at(5'200 * kMs, 3, 20);
  EXPECT_EQ(w.kept(kAll).lost, 2u);
  w.reset();
  EXPECT_EQ(w.kept(kAll).lost, 0u);
}

// A late D-SACK in one window takes back a retransmit counted in the one before: the kept
// windows net out, the running window alone never goes below 0.
TEST(PeerLoss, LateDuplicatesNetOutAcrossWindows) {
  PeerLossWindows w(500 * kMs, 2);
  round(w, 100 * kMs, {{7, 1, 0, 0}});
  round(w, 200 * kMs, {{7, 1, 5, 100}});
  round(w, 600 * kMs, {{7, 1, 2, 200}});
  EXPECT_EQ(w.kept(kAll).lost, 2u);
  EXPECT_EQ(w.kept(kAll).sent, 200u);
  EXPECT_EQ(w.running(kAll).lost, 0u);
  EXPECT_EQ(w.running(kAll).sent, 100u);
}

// A peer that tells of a fault of its own after its losses were counted leaves the sums they
// are in, and the verdict; the running window is judged alone, a thin link's windows pooled.
TEST(PeerLoss, TheVerdictCountsOnlyTheWitnessesOfNow) {
  const LossRule rule{12, 3000};
  PeerLossWindows w(500 * kMs, 3);
  round(w, 100 * kMs, {{1, 1, 0, 0}, {2, 2, 0, 0}});
  round(w, 200 * kMs, {{1, 1, 10, 500}, {2, 2, 10, 500}});
  EXPECT_TRUE(w.gray(rule, kAll)) << "20 of 1000 in the running window";
  const PeerLossWindows::Witness notPeer2 = [](int peer) { return peer != 2; };
  EXPECT_EQ(w.kept(notPeer2).lost, 10u);
  EXPECT_EQ(w.losingPeers(notPeer2), std::vector<int>{1});
  EXPECT_FALSE(w.gray(rule, notPeer2)) << "peer 1's 10 alone are under the count";
  // A thin link: 7 of 300 a window, three windows: none reaches the count, the pool does.
  PeerLossWindows thin(500 * kMs, 3);
  round(thin, 0, {{1, 1, 0, 0}});
  round(thin, 100 * kMs, {{1, 1, 7, 300}});
  EXPECT_FALSE(thin.gray(rule, kAll));
  round(thin, 600 * kMs, {{1, 1, 10, 600}});
  EXPECT_FALSE(thin.gray(rule, kAll)) << "10 of 600 over two windows: under the count";
  round(thin, 1'100 * kMs, {{1, 1, 21, 900}});
  EXPECT_TRUE(thin.gray(rule, kAll)) << "21 of 900 over three thin windows";
  // The same losses on a busy link: never pooled.
  PeerLossWindows busy(500 * kMs, 3);
  round(busy, 0, {{1, 1, 0, 0}});
  round(busy, 100 * kMs, {{1, 1, 7, 5'000}});
  round(busy, 600 * kMs, {{1, 1, 14, 10'000}});
  round(busy, 1'100 * kMs, {{1, 1, 21, 15'000}});
  EXPECT_FALSE(busy.gray(rule, kAll));
  // A window that reaches the count is judged alone, as the detector does: 12 of 4000 is at the
  // rate but not above chance, though pooled with the thin windows before it (32 of 4200) it
  // would pass.
  PeerLossWindows alone(500 * kMs, 3);
  round(alone, 0, {{1, 1, 0, 0}});
  round(alone, 100 * kMs, {{1, 1, 10, 100}});
  round(alone, 600 * kMs, {{1, 1, 20, 200}});
  round(alone, 1'100 * kMs, {{1, 1, 32, 4'200}});
  EXPECT_TRUE(poolIsGray(alone.kept(kAll), 3, rule)) << "the pool alone would say gray";
  EXPECT_FALSE(alone.gray(rule, kAll)) << "12 of 4000 in the running window: judged alone";
}

// Only a peer that told of no fault within the evidence's span is a witness: one with the rail
// down, or whose report of a rail down or back up is recent, has retransmits of its own fault.
TEST(PeerLoss, APeerThatToldOfAFaultIsNoWitnessForTheEvidencesSpan) {
  RailState rs(2);
  rs.setRanks(4, 0);
  const uint64_t window = 4'500 * kMs;
  uint64_t now = 100'000 * kMs;
  EXPECT_TRUE(rs.peerHealthy(1, 1, now, window)) << "no report yet: all up";
  EXPECT_FALSE(rs.peerHealthy(4, 1, now, window)) << "no such rank";
  EXPECT_FALSE(rs.peerHealthy(1, 2, now, window)) << "no such rail";
  rs.setPeerRails(2, 0b01, now);  // rank 2: rail 1 down
  EXPECT_FALSE(rs.peerHealthy(2, 1, now + 10'000 * kMs, window)) << "the rail is down there";
  EXPECT_FALSE(rs.peerHealthy(2, 0, now + 1'000 * kMs, window)) << "its other rail, within the span of its report";
  rs.setPeerRails(2, 0b11, now + 20'000 * kMs);  // back up
  EXPECT_FALSE(rs.peerHealthy(2, 1, now + 21'000 * kMs, window)) << "back up within the span";
  EXPECT_TRUE(rs.peerHealthy(2, 1, now + 20'000 * kMs + window, window)) << "back up a span ago";
  rs.setPeerRails(3, 0b11, now);  // all up, as before: no fault told
  EXPECT_TRUE(rs.peerHealthy(3, 1, now, window));
}

}  // namespace
}  // namespace reccl::failover
