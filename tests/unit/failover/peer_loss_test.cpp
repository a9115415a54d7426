// Whose retransmits a held DEGRADED rests on (failover/health/peer_loss.h): the detector's rule
// on the losses of the connections to peers that have the rail up, over its evidence's span.
#include "failover/health/peer_loss.h"

#include "failover/health/rail_state.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace reccl::failover {
namespace {

constexpr uint64_t kMs = 1'000'000ull;

TEST(PeerLoss, TheDetectorsCountAndShare) {
  const LossRule rule{12, 3};  // the defaults: 12 lost, 3 per mille
  struct Case {
    std::string name;
    LossCount count;
    LossRule rule;
    bool gray;
  };
  const std::vector<Case> cases = {
      {"nothing lost", {0, 100000}, rule, false},
      {"under the count", {11, 100}, rule, false},
      {"the count at a high share", {12, 100}, rule, true},
      {"the count at exactly the share", {12, 4000}, rule, true},
      {"the count under the share (a saturated healthy link)", {12, 4001}, rule, false},
      {"the count alone when the share is off", {12, 1'000'000}, {12, 0}, true},
      {"a zero threshold still needs one lost segment", {0, 0}, {0, 0}, false},
  };
  for (const auto& c : cases) EXPECT_EQ(lossIsGray(c.count, c.rule), c.gray) << c.name;
}

TEST(PeerLoss, APathCountsFromItsFirstSampleAndAGoneOneIsForgotten) {
  PeerLossWindows w(500 * kMs, 3);
  uint64_t now = 10'000 * kMs;
  // First round: baselines only, whatever the path lost before.
  w.beginRound(now);
  w.add(1, 2, 500, 10'000);
  w.add(2, 3, 7, 900);
  w.endRound();
  EXPECT_EQ(w.sum().lost, 0u);
  EXPECT_EQ(w.sum().sent, 0u);
  // Path 1 loses 10 of 200 more; path 2 nothing.
  now += 100 * kMs;
  w.beginRound(now);
  w.add(1, 2, 510, 10'200);
  w.add(2, 3, 7, 1'000);
  w.endRound();
  EXPECT_EQ(w.sum().lost, 10u);
  EXPECT_EQ(w.sum().sent, 300u);
  EXPECT_EQ(w.losingPeers(), std::vector<int>{2});
  // Path 1 is gone (its connection moved); a new path of the same peer starts from its own
  // counters, not from path 1's.
  now += 100 * kMs;
  w.beginRound(now);
  w.add(2, 3, 9, 1'100);
  w.add(3, 2, 4, 50);
  w.endRound();
  EXPECT_EQ(w.sum().lost, 12u);
  EXPECT_EQ(w.sum().sent, 400u);
  EXPECT_EQ(w.losingPeers(), (std::vector<int>{2, 3}));
  // Path 1 back under the same id: a first sample again.
  now += 100 * kMs;
  w.beginRound(now);
  w.add(1, 2, 900, 20'000);
  w.endRound();
  EXPECT_EQ(w.sum().lost, 12u);
}

TEST(PeerLoss, OnlyTheKeptWindowsCountAndLateDuplicatesTakeBack) {
  PeerLossWindows w(500 * kMs, 2);  // a second of evidence
  uint64_t now = 0;
  auto round = [&](uint64_t at, uint64_t lost, uint64_t sent) {
    now = at;
    w.beginRound(now);
    w.add(7, 1, lost, sent);
    w.endRound();
  };
  round(100 * kMs, 0, 0);
  round(200 * kMs, 20, 1'000);  // window 0
  EXPECT_EQ(w.sum().lost, 20u);
  round(600 * kMs, 25, 2'000);  // window 1
  EXPECT_EQ(w.sum().lost, 25u);
  // A D-SACK that came late takes back retransmits the receiver had: the counter falls.
  round(700 * kMs, 22, 2'100);
  EXPECT_EQ(w.sum().lost, 22u);
  // Window 2: window 0 is out of the span.
  round(1'100 * kMs, 22, 2'200);
  EXPECT_EQ(w.sum().lost, 2u);
  EXPECT_EQ(w.sum().sent, 1'200u);
  // A long quiet: nothing left.
  round(5'000 * kMs, 22, 2'300);
  EXPECT_EQ(w.sum().lost, 0u);
  EXPECT_EQ(w.sum().sent, 100u);
  EXPECT_TRUE(w.losingPeers().empty());
  // A 32-bit counter that wrapped counts from there, not as a huge negative.
  round(5'100 * kMs, 1, 10);
  EXPECT_EQ(w.sum().sent, 100u);
  round(5'200 * kMs, 3, 20);
  EXPECT_EQ(w.sum().lost, 2u);
  w.reset();
  EXPECT_EQ(w.sum().lost, 0u);
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
