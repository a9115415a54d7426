// Where a standby goes (rebalance/standby_choice.h): one count of the connection table judges
// every connection of an upkeep pass, and gives each the loads a count of its own would give.
#include "failover/rebalance/standby_choice.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "failover/rebalance/rebalance.h"
#include "failover/standby/standby.h"

namespace reccl::failover {
namespace {

// The rule as stated, one connection at a time: its role's connections per rail, plus the
// standbys of the others of its role on its rail.
std::vector<int> loadByWalking(const std::vector<ConnPlacement>& conns, size_t self, int nrails) {
  const ConnPlacement& c = conns[self];
  std::vector<int> load(static_cast<size_t>(nrails), 0);
  for (size_t i = 0; i < conns.size(); ++i) {
    const ConnPlacement& d = conns[i];
    if (d.role != c.role) continue;
    if (d.rail >= 0 && d.rail < nrails) ++load[static_cast<size_t>(d.rail)];
    if (i != self && d.rail == c.rail && d.standbyTarget >= 0 && d.standbyTarget < nrails)
      ++load[static_cast<size_t>(d.standbyTarget)];
  }
  return load;
}

// Failed tries in a row wait 0.5 s, then twice as long each time, up to 16 s.
TEST(StandbyChoice, FailedTriesBackOffToTheCap) {
  const uint64_t s = 1'000'000'000;
  EXPECT_EQ(standbyBackoffNs(0), s / 2);
  EXPECT_EQ(standbyBackoffNs(1), s / 2);
  EXPECT_EQ(standbyBackoffNs(2), 1 * s);
  EXPECT_EQ(standbyBackoffNs(3), 2 * s);
  EXPECT_EQ(standbyBackoffNs(4), 4 * s);
  EXPECT_EQ(standbyBackoffNs(5), 8 * s);
  EXPECT_EQ(standbyBackoffNs(6), 16 * s);
  EXPECT_EQ(standbyBackoffNs(7), 16 * s);
  EXPECT_EQ(standbyBackoffNs(UINT32_MAX), 16 * s);
}

TEST(StandbyChoice, OneCountGivesEachConnectionTheLoadsOfItsOwnWalk) {
  std::mt19937 rng(12345);
  for (int round = 0; round < 200; ++round) {
    const int nrails = 1 + static_cast<int>(rng() % 8);
    std::vector<ConnPlacement> conns(rng() % 64);
    for (auto& c : conns) {
      c.role = rng() % 2 ? Role::kSender : Role::kReceiver;
      c.rail = static_cast<int>(rng() % static_cast<unsigned>(nrails + 1)) - 1;  // -1: not on a rail
      c.standbyTarget = static_cast<int>(rng() % static_cast<unsigned>(nrails + 1)) - 1;
    }
    StandbyLoads loads(conns, nrails);
    std::vector<double> w(static_cast<size_t>(nrails));
    for (auto& x : w) x = static_cast<double>(rng() % 4) / 2;  // 0: unusable
    for (size_t i = 0; i < conns.size(); ++i) {
      std::vector<int> want = loadByWalking(conns, i, nrails);
      ASSERT_EQ(loads.loadFor(conns[i]), want) << "round " << round << " connection " << i;
      std::vector<double> ww = w;
      if (conns[i].rail >= 0) ww[static_cast<size_t>(conns[i].rail)] = 0;
      EXPECT_EQ(chooseStandbyRail(loads, conns[i], w).rail, pickRail(want, ww, -1))
          << "round " << round << " connection " << i;
    }
  }
}

TEST(StandbyChoice, TheStandbysOfOneRailSpreadOverTheOthers) {
  // Three senders on rail 0 (4 rails, equal weights), their standbys placed one after another.
  std::vector<ConnPlacement> conns(3, ConnPlacement{Role::kSender, 0, -1});
  const std::vector<double> w{1, 1, 1, 1};
  std::vector<int> got;
  for (auto& c : conns) {
    StandbyLoads loads(conns, 4);
    c.standbyTarget = chooseStandbyRail(loads, c, w).rail;
    got.push_back(c.standbyTarget);
  }
  EXPECT_EQ(got, (std::vector<int>{1, 2, 3}));
  // Receivers load the other direction: they do not count.
  conns.push_back({Role::kReceiver, 1, 2});
  StandbyLoads loads(conns, 4);
  EXPECT_EQ(loads.loadFor(conns[0]), (std::vector<int>{3, 0, 1, 1}));  // its own standby (rail 1) not counted
}

TEST(StandbyChoice, NeverItsOwnRailAndNoneWithoutAnother) {
  std::vector<ConnPlacement> conns{{Role::kSender, 1, -1}};
  StandbyLoads loads(conns, 2);
  EXPECT_EQ(chooseStandbyRail(loads, conns[0], {5, 1}).rail, 0);
  EXPECT_EQ(chooseStandbyRail(loads, conns[0], {0, 1}).rail, -1);
  StandbyChoice c = chooseStandbyRail(loads, conns[0], {2, 1}, 1);
  EXPECT_EQ(c.scoreCost, 0.0) << "its own rail is not usable for its standby";
  EXPECT_DOUBLE_EQ(c.bestCost, 0.5);  // (0 + 1) / 2
}

TEST(StandbyChoice, AStandbyDroppedDuringThePassCountsNoMore) {
  std::vector<ConnPlacement> conns{{Role::kSender, 0, 1}, {Role::kSender, 0, 1}, {Role::kSender, 0, -1}};
  StandbyLoads loads(conns, 3);
  EXPECT_EQ(loads.loadFor(conns[2]), (std::vector<int>{3, 2, 0}));
  loads.dropStandby(conns[0]);
  EXPECT_EQ(loads.loadFor(conns[2]), (std::vector<int>{3, 1, 0}));
  loads.dropStandby(conns[0]);
  loads.dropStandby(conns[0]);  // never below zero
  EXPECT_EQ(loads.loadFor(conns[2]), (std::vector<int>{3, 0, 0}));
}

}  // namespace
}  // namespace reccl::failover
