// A rail that comes back takes back the connections that prefer it as a fail-back, also those
// that sit on a gray (DEGRADED) rail meanwhile; only the rest of what stayed on the gray rail is
// moved by weight (reason degraded). Real faults on the 2-host x 2-rail testbed
// (FailoverTest::grayRail0ThenRail1Back): host 0's rail 1 is pulled at the switch (its connections
// move to rail 0), rail 0 then drops 1 % on host 0's cable (rank 0's in-process BPF detector marks
// it DEGRADED, nothing healthy is left, so the connections stay on it), then rail 1 comes back.
// Results are checked bit for bit by the worker.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "failover_job.h"

namespace {

using reccl::test::failover::countMatches;
using reccl::test::failover::Job;
using FailoverFailBackOrder = reccl::test::failover::FailoverTest<2>;

TEST_F(FailoverFailBackOrder, PreferredRailComesBackFromAGrayRailAsFailBack) {
  std::unique_ptr<Job> job;
  ASSERT_NO_FATAL_FAILURE(grayRail0ThenRail1Back(&job));
  Job& j = *job;
  // Rank 0 is where rail 1 comes back: what prefers rail 1 goes home as a fail-back.
  bool failedBack = j.waitForMatch("rank 0: fail-back of rank [01]->[01] ch [0-9]+ rail [0-9]+ \\([^)]*\\) -> rail 1", 1,
                                   std::chrono::seconds(30));
  expectAllOk(j, 2);
  std::string t = j.text();
  EXPECT_TRUE(failedBack) << t;
  // Every connection rank 0 moved off rail 1 at the fault prefers rail 1: each comes back as a
  // fail-back, none of them by weight.
  int moved = countMatches(t, "rank 0: failover (by peer )?of rank [01]->[01] ch [0-9]+ rail [0-9]+ \\([^)]*\\) -> rail 0 \\(rail0\\) epoch "
                              "[0-9]+: reason link-down");
  EXPECT_GE(moved, 1) << t;
  EXPECT_GE(countMatches(t, "rank 0: fail-back of rank [01]->[01] ch [0-9]+ rail [0-9]+ \\([^)]*\\) -> rail 1"), moved) << t;
  EXPECT_EQ(countMatches(t, "no path for"), 0) << t;
}

}  // namespace
