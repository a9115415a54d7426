// Rail weights from measured throughput (pure functions) and their effect on rail assignment.
#include <gtest/gtest.h>

#include "failover/rebalance/rebalance.h"

namespace reccl::failover {
namespace {

TEST(RailWeights, SmoothingStartsAtFirstSampleAndMovesByAlpha) {
  EXPECT_DOUBLE_EQ(smoothThroughput(0, 100 << 20, 0.1, 0.3, 1 << 20), (100 << 20) / 0.1);
  double prev = 1e9;
  double next = smoothThroughput(prev, 50'000'000, 0.1, 0.3, 1 << 20);  // sample 0.5 GB/s
  EXPECT_DOUBLE_EQ(next, 1e9 + 0.3 * (0.5e9 - 1e9));
}

TEST(RailWeights, IdleOrEmptyIntervalsKeepTheEstimate) {
  EXPECT_DOUBLE_EQ(smoothThroughput(7e8, 1000, 0.1, 0.3, 1 << 20), 7e8);  // below minBytes
  EXPECT_DOUBLE_EQ(smoothThroughput(7e8, 1 << 30, 0, 0.3, 1 << 20), 7e8);  // no time passed
  EXPECT_DOUBLE_EQ(smoothThroughput(0, 0, 0.1, 0.3, 1 << 20), 0.0);        // never measured
}

TEST(RailWeights, ConvergesToASteadyRate) {
  double e = 0;
  for (int i = 0; i < 60; ++i) e = smoothThroughput(e, 150'000'000, 0.1, 0.3, 1 << 20);
  EXPECT_NEAR(e, 1.5e9, 1e3);
  for (int i = 0; i < 60; ++i) e = smoothThroughput(e, 50'000'000, 0.1, 0.3, 1 << 20);
  EXPECT_NEAR(e, 0.5e9, 1e3);
}

TEST(RailWeights, ProportionalToMeasuredThroughput) {
  auto w = weightsFromThroughput({2e9, 1e9, 5e8}, 0b111);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_DOUBLE_EQ(w[0], 1.0);
  EXPECT_DOUBLE_EQ(w[1], 0.5);
  EXPECT_DOUBLE_EQ(w[2], 0.25);
}

TEST(RailWeights, DownRailsGetZeroAndDoNotSetTheScale) {
  // Rail 0 (fastest) is down: rail 1 becomes the reference.
  auto w = weightsFromThroughput({2e9, 1e9, 5e8}, 0b110);
  EXPECT_DOUBLE_EQ(w[0], 0.0);
  EXPECT_DOUBLE_EQ(w[1], 1.0);
  EXPECT_DOUBLE_EQ(w[2], 0.5);
  EXPECT_EQ(weightsFromThroughput({1e9, 1e9}, 0), (std::vector<double>{0, 0}));
}

TEST(RailWeights, UnmeasuredRailsGetTheMeanOfTheMeasured) {
  auto w = weightsFromThroughput({1e9, 0, 5e8}, 0b111);
  EXPECT_DOUBLE_EQ(w[1], 0.75);
  EXPECT_EQ(weightsFromThroughput({0, 0}, 0b11), (std::vector<double>{1, 1}));  // nothing measured yet
}

TEST(RailWeights, FeedAssignmentAfterFailoverAndFailBack) {
  // 3 rails measured at 2:1:1, rail 0 fails: its 4 connections split evenly over rails 1 and 2.
  std::vector<double> bps{2e9, 1e9, 1e9};
  auto down = assignRails({0, 0, 0, 0, 1, 2}, weightsFromThroughput(bps, 0b110));
  EXPECT_EQ(down, (std::vector<int>{1, 2, 1, 2, 1, 2}));
  // Rails 1 and 2 measured at 2:1 (rail 2 slower): rail 1 takes the larger share.
  auto skewed = assignRails({0, 0, 0, 0, 0, 0}, weightsFromThroughput({2e9, 2e9, 1e9}, 0b110));
  int on1 = 0;
  for (int r : skewed) on1 += r == 1;
  EXPECT_EQ(on1, 4);
  // Fail-back: rail 0 healthy again keeps its last measurement and takes its connections back.
  auto back = assignRails({0, 0, 0, 0, 1, 2}, weightsFromThroughput(bps, 0b111));
  EXPECT_EQ(back, (std::vector<int>{0, 0, 0, 0, 1, 2}));
  // A connection leaving rail 1 goes to the rail with the lowest (load + 1) / weight.
  EXPECT_EQ(pickRail({1, 1, 1}, weightsFromThroughput(bps, 0b111), 1), 0);
}

}  // namespace
}  // namespace reccl::failover
