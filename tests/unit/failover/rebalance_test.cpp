// Rail assignment after failover and fail-back (pure functions).
#include <gtest/gtest.h>

#include "failover/rebalance/rebalance.h"

namespace reccl::failover {
namespace {

TEST(Rebalance, AllHealthyKeepsPreferred) {
  EXPECT_EQ(assignRails({0, 1, 0, 1}, {1, 1}), (std::vector<int>{0, 1, 0, 1}));
}

TEST(Rebalance, FailedRailMovesEverythingToSurvivor) {
  EXPECT_EQ(assignRails({0, 1, 0, 1}, {0, 1}), (std::vector<int>{1, 1, 1, 1}));
}

TEST(Rebalance, DisplacedConnectionsSpreadOverSurvivorsByWeight) {
  // 4 rails, rail 0 down: its 3 connections go to the least loaded survivors in turn.
  auto out = assignRails({0, 0, 0, 1, 2, 3}, {0, 1, 1, 1});
  EXPECT_EQ(out, (std::vector<int>{1, 2, 3, 1, 2, 3}));
  // A rail with twice the weight takes twice the displaced load.
  out = assignRails({0, 0, 0, 0, 0, 0}, {0, 2, 1});
  int on1 = 0, on2 = 0;
  for (int r : out) (r == 1 ? on1 : on2)++;
  EXPECT_EQ(on1, 4);
  EXPECT_EQ(on2, 2);
}

TEST(Rebalance, FailBackRestoresPreferred) {
  auto down = assignRails({0, 1}, {0, 1});
  EXPECT_EQ(down, (std::vector<int>{1, 1}));
  EXPECT_EQ(assignRails({0, 1}, {1, 1}), (std::vector<int>{0, 1}));
}

TEST(Rebalance, NothingUsable) {
  EXPECT_EQ(assignRails({0, 1}, {0, 0}), (std::vector<int>{-1, -1}));
  EXPECT_EQ(assignRails({}, {1}), std::vector<int>{});
  EXPECT_EQ(assignRails({5, -1}, {1}), (std::vector<int>{0, 0}));  // out-of-range preferences
}

TEST(Rebalance, PickRailHonoursExcludeLoadAndWeight) {
  EXPECT_EQ(pickRail({0, 0}, {1, 1}, 0), 1);
  EXPECT_EQ(pickRail({3, 0}, {1, 1}, -1), 1);
  EXPECT_EQ(pickRail({3, 1}, {1, 1}, -1), 1);
  EXPECT_EQ(pickRail({0, 0}, {1, 1}, -1), 0);  // tie: lowest index
  EXPECT_EQ(pickRail({0, 0}, {0, 1}, 1), -1);
  EXPECT_EQ(pickRail({4, 1}, {4, 1}, -1), 0);  // (4+1)/4 < (1+1)/1
}

}  // namespace
}  // namespace reccl::failover
