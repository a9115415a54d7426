// The cost model behind recclGroupSimulateEnd (api/cost_model.h): the first guess before any
// call; the fit recovering the seconds per hop and per byte of calls that follow such a law; one
// size only still answered near its own time; times that fall as calls grow never priced below
// zero. The hops and bytes of the operations themselves: ccl_group_test.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "algo/cost.h"
#include "api/cost_model.h"

namespace {

using reccl::algo::Cost;
using reccl::api::CostModel;

TEST(CostModel, BeforeAnyCallItAnswersWithTheFirstGuess) {
  CostModel m;
  const Cost c{4, 8e6};
  EXPECT_NEAR(m.estimateSeconds(c), 5 * CostModel::kGuessHopSeconds + 8e6 / CostModel::kGuessBytesPerSecond, 1e-12);
  EXPECT_NEAR(m.hopSeconds(), CostModel::kGuessHopSeconds, 1e-12);
}

TEST(CostModel, CallsThatFollowALawAreFittedToIt) {
  const double a = 30e-6, bw = 2.5e9;  // 30 us a hop, 2.5 GB/s: other than the guess on both
  CostModel m;
  for (int round = 0; round < 20; ++round)
    for (double bytes : {1e3, 64e3, 1e6, 16e6, 64e6}) {
      const Cost c{2, bytes};
      m.observe(c, a * 3 + bytes / bw);
    }
  EXPECT_NEAR(m.hopSeconds(), a, 0.02 * a);
  EXPECT_NEAR(m.bytesPerSecond(), bw, 0.02 * bw);
  for (double bytes : {4e3, 256e6}) {
    const Cost c{2, bytes};
    const double truth = a * 3 + bytes / bw;
    EXPECT_NEAR(m.estimateSeconds(c), truth, 0.02 * truth) << bytes << " bytes";
  }
}

TEST(CostModel, OneSizeOnlyIsStillAnsweredNearItsOwnTime) {
  CostModel m;
  const Cost c{2, 4e6};
  for (int i = 0; i < 50; ++i) m.observe(c, 0.010);
  EXPECT_NEAR(m.estimateSeconds(c), 0.010, 0.0005);
  EXPECT_GT(m.estimateSeconds(Cost{2, 8e6}), m.estimateSeconds(c));
}

TEST(CostModel, TimesThatFallAsCallsGrowAreNeverPricedBelowZero) {
  CostModel m;
  for (int i = 0; i < 30; ++i) {
    m.observe(Cost{2, 1e3}, 0.005);
    m.observe(Cost{2, 64e6}, 0.001);
  }
  for (double bytes : {0.0, 1e3, 1e9}) EXPECT_GE(m.estimateSeconds(Cost{2, bytes}), 0) << bytes;
  EXPECT_GT(m.bytesPerSecond(), 0);
  EXPECT_TRUE(std::isfinite(m.bytesPerSecond()));
}

}  // namespace
