// Failover's decisions as pure functions, table-driven: no root, namespace or socket.
//   grayExplained / heldGrayIsReal (health/gray.h): is a DEGRADED explained by a known fault?
//   nicPollStep (health/nic_poll.h): is a rail down, is it back after the hold-down?
//   chooseMoveRail (rebalance/move_choice.h): which rail does a moving connection take?
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "failover/health/gray.h"
#include "failover/health/nic_poll.h"
#include "failover/rebalance/move_choice.h"

namespace reccl::failover {
namespace {

constexpr uint64_t kMs = 1'000'000ull;

struct GrayCase {
  std::string name;
  GrayFacts facts;
  bool explained;
  bool onlyAPeer;  // and a peer's fault alone explains it: the other peers' connections can tell
};

// Whose retransmits: a peer's fault alone can be told apart from the rail's own by the other
// peers' connections (health/peer_loss.h); this end's own fault or move cannot.
TEST(FailoverDecisions, GrayExplainedByAKnownFaultOrMove) {
  const uint64_t now = 10'000 * kMs, window = 1'000 * kMs;
  auto f = [&](uint64_t peer, uint64_t left, uint64_t up, bool downAtPeer) {
    return GrayFacts{now, window, peer, left, up, downAtPeer};
  };
  const std::vector<GrayCase> cases = {
      {"nothing known", f(0, 0, 0, false), false, false},
      {"a peer has the rail down now", f(0, 0, 0, true), true, true},
      {"a peer reported it within the window", f(now - 999 * kMs, 0, 0, false), true, true},
      {"a peer's report is a window old", f(now - window, 0, 0, false), false, false},
      {"a fail-back left the rail just now", f(0, now - 1 * kMs, 0, false), true, false},
      {"a fail-back left it long ago", f(0, now - 5'000 * kMs, 0, false), false, false},
      {"the rail came back here just now", f(0, 0, now - 10 * kMs, false), true, false},
      {"the rail came back here long ago", f(0, 0, now - 2'000 * kMs, false), false, false},
      {"every explanation stale", f(now - 3'000 * kMs, now - 4'000 * kMs, now - 5'000 * kMs, false), false, false},
      {"a peer's fault, and a fail-back left the rail just now", f(0, now - 1 * kMs, 0, true), true, false},
      {"a peer's fault, and the rail came back here just now", f(0, 0, now - 10 * kMs, true), true, false},
      {"a peer's fault, this end's own long over", f(0, now - 5'000 * kMs, now - 2'000 * kMs, true), true, true},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(grayExplained(c.facts), c.explained) << c.name;
    EXPECT_EQ(onlyAPeerExplainsGray(c.facts), c.onlyAPeer) << c.name;
  }
}

TEST(FailoverDecisions, AHeldGrayIsRealAQuarterSecondAfterTheDetectorsClear) {
  const uint64_t clear = 5'000 * kMs;
  struct Case {
    uint64_t sinceExplained;
    bool real;
  };
  for (const Case& c : std::vector<Case>{{0, false},
                                         {clear, false},
                                         {clear + 249 * kMs, false},
                                         {clear + 250 * kMs, true},
                                         {clear + 10'000 * kMs, true}}) {
    const uint64_t explainedAt = 1'000 * kMs;
    EXPECT_EQ(heldGrayIsReal(explainedAt + c.sinceExplained, explainedAt, clear), c.real) << c.sinceExplained / kMs;
  }
}

// A sequence of looks at one NIC and the verdict expected at each.
TEST(FailoverDecisions, NicPollDownAtOnceUpAfterTheHoldDown) {
  const uint64_t hold = 1'000 * kMs;
  struct Look {
    uint64_t atMs;
    bool up;
    NicPollVerdict verdict;
  };
  const std::vector<std::pair<std::string, std::vector<Look>>> cases = {
      {"healthy", {{0, true, NicPollVerdict::kNone}, {5, true, NicPollVerdict::kNone}}},
      {"down then back after the hold-down",
       {{0, false, NicPollVerdict::kDown}, {5, false, NicPollVerdict::kNone}, {10, true, NicPollVerdict::kNone},
        {1009, true, NicPollVerdict::kNone}, {1010, true, NicPollVerdict::kBackUp}, {1015, true, NicPollVerdict::kNone}}},
      {"a flap inside the hold-down restarts it",
       {{0, false, NicPollVerdict::kDown}, {10, true, NicPollVerdict::kNone}, {600, false, NicPollVerdict::kNone},
        {700, true, NicPollVerdict::kNone}, {1010, true, NicPollVerdict::kNone}, {1700, true, NicPollVerdict::kBackUp}}},
  };
  for (const auto& [name, looks] : cases) {
    NicPollState s;
    for (const Look& l : looks)
      EXPECT_EQ(nicPollStep(s, l.up, l.atMs * kMs, hold), l.verdict) << name << " at " << l.atMs << " ms";
  }
}

struct MoveCase {
  std::string name;
  MoveChoiceInput in;
  MoveChoice out;
};

MoveChoiceInput move(MigrateReason reason, int from, int to, int cur, uint64_t up, uint64_t tried,
                     std::vector<double> w, std::vector<int> load, uint64_t gray = 0) {
  MoveChoiceInput in;
  in.grayHere = gray;
  in.reason = reason;
  in.fromRail = from;
  in.toRail = to;
  in.currentRail = cur;
  in.upHere = up;
  in.tried = tried;
  in.weights = std::move(w);
  in.load = std::move(load);
  return in;
}

TEST(FailoverDecisions, AMovingConnectionsRail) {
  using R = MigrateReason;
  const std::vector<MoveCase> cases = {
      {"link down: the least loaded other rail", move(R::kLinkDown, 0, -1, 0, 0b110, 0, {0, 1, 1}, {2, 3, 1}), {2}},
      {"weights count: twice the weight takes twice the load",
       move(R::kLinkDown, 0, -1, 0, 0b110, 0, {0, 1, 0.5}, {0, 1, 0}), {1}},
      {"never the rail being left, even when it looks best",
       move(R::kLinkDown, 1, -1, 1, 0b11, 0, {1, 1}, {5, 0}), {0}},
      {"a tried rail is out", move(R::kLinkDown, 0, -1, 0, 0b110, 0b100, {0, 1, 1}, {0, 5, 0}), {1}},
      {"nothing usable: a rail declared down is the last resort",
       move(R::kLinkDown, 0, -1, 0, 0b01, 0, {0, 0}, {1, 0}), {1}},
      {"nothing left at all", move(R::kLinkDown, 0, -1, 0, 0, 0b10, {0, 0}, {0, 0}), {-1}},
      {"a gray rail with nowhere to go keeps its connections",
       move(R::kDegraded, 0, -1, 0, 0b00, 0, {0, 0}, {1, 0}), {-1, true}},
      {"a gray connection already moved elsewhere does not stay",
       move(R::kDegraded, 0, -1, 1, 0b00, 0, {0, 0}, {1, 0}), {1}},
      {"a stall may retry the rail it left while that rail is up here",
       move(R::kStall, 0, -1, 0, 0b01, 0b10, {0, 0}, {1, 0}), {0}},
      {"a stall retries the rail it left, up at both ends, before a rail declared down, however loaded",
       move(R::kStall, 0, -1, 0, 0b01, 0, {1, 0}, {5, 0}), {0}},
      {"... and before a rail up here that the peer reported down",
       move(R::kStall, 0, -1, 0, 0b011, 0, {1, 0, 0}, {5, 0, 0}), {0}},
      {"the rail left, reported down at the peer: a gray rail here first",
       move(R::kStall, 0, -1, 0, 0b001, 0, {0, 0, 0}, {5, 0, 0}, 0b100), {2}},
      {"the rail left, reported down at the peer, no gray one: up here before down here, by load",
       move(R::kStall, 0, -1, 0, 0b001, 0, {0, 0, 0}, {5, 0, 0}), {0}},
      {"a stall on a gray rail with nowhere healthy reconnects on it, before a rail declared down",
       move(R::kStall, 0, -1, 0, 0b00, 0, {0, 0}, {0, 0}, 0b01), {0}},
      {"a socket error on the only rail, gray: the same", move(R::kSocketError, 0, -1, 0, 0, 0, {0}, {1}, 0b1), {0}},
      {"a gray rail already tried by the job is not tried again",
       move(R::kStall, 0, -1, 0, 0b00, 0b01, {0, 0}, {0, 0}, 0b01), {1}},
      {"a healthy rail still comes first", move(R::kStall, 0, -1, 0, 0b10, 0, {0, 1}, {0, 0}, 0b01), {1}},
      {"a link-down never retries the rail it left", move(R::kLinkDown, 0, -1, 0, 0b01, 0b10, {0, 0}, {1, 0}), {-1}},
      {"fail-back: its own rail when up here", move(R::kFailBack, 1, 0, 1, 0b11, 0, {1, 1}, {9, 0}), {0}},
      {"fail-back against the peer's last word: a short try",
       move(R::kFailBack, 1, 0, 1, 0b11, 0, {0, 1}, {0, 0}), {0, false, true}},
      {"fail-back onto a rail down here: stays", move(R::kFailBack, 1, 0, 1, 0b10, 0, {0, 1}, {0, 0}), {-1}},
      {"fail-back already tried", move(R::kFailBack, 1, 0, 1, 0b11, 0b01, {1, 1}, {0, 0}), {-1}},
  };
  for (const auto& c : cases) {
    MoveChoice m = chooseMoveRail(c.in);
    EXPECT_EQ(m.rail, c.out.rail) << c.name;
    EXPECT_EQ(m.stay, c.out.stay) << c.name;
    EXPECT_EQ(m.speculative, c.out.speculative) << c.name;
  }
}

}  // namespace
}  // namespace reccl::failover
