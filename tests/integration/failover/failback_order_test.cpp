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
using reccl::test::failover::dropOnRail0;
using reccl::test::failover::Job;
using FailoverFailBackOrder = reccl::test::failover::FailoverTest<2>;
using FailoverFailBackRetry = reccl::test::failover::FailoverTest<2>;

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

// A fail-back that failed (rail 0 back up at host 0, but its cable dropping everything, as a
// switch port that still learns would) is offered again while the rail stays up: once the cable
// carries, the connections go home without another up event. Before, they stayed on rail 1 until
// rail 0's next fault.
TEST_F(FailoverFailBackRetry, AFailBackThatFailedIsTriedAgainWhileTheRailStaysUp) {
  // The drop makes SYNs retransmit: no retransmit count may declare the rail DEGRADED here.
  Job j(testbed().name(),
        env("RECCL_DETECTOR=bpf RECCL_DEBUG=INFO RECCL_DEBUG_SUBSYS=FAILOVER RECCL_RETRANS_THRESHOLD=1000000 "
            "RECCL_FAILOVER_TIMEOUT_MS=3000 WORKER_SECONDS=5"),
        120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
  ASSERT_TRUE(j.waitFor("fault source: in-process detector", 2, std::chrono::seconds(20))) << j.text();
  link(false, 0, 0, true);
  ASSERT_TRUE(j.waitForMatch("rank 0: failover (by peer )?of .* -> rail 1 \\(rail1\\) epoch [0-9]+: reason link-down", 1,
                             std::chrono::seconds(30)))
      << j.text();
  ASSERT_EQ(dropOnRail0(netns(0), true, "1"), 0);
  link(true, 0, 0, true);
  // No assertion until the drop is gone: the testbed serves the suite's next tests.
  bool failed = j.waitForMatch("rank 0: rank [01]->[01] ch [0-9]+: rail 0 failed", 1, std::chrono::seconds(20));
  int clear = dropOnRail0(netns(0), false, "0");
  bool back = failed && j.waitForMatch("rank 0: fail-back of rank [01]->[01] ch [0-9]+ rail 1 \\(rail1\\) -> rail 0",
                                       1, std::chrono::seconds(20));
  expectAllOk(j, 2);
  std::string t = j.text();
  EXPECT_EQ(clear, 0);
  EXPECT_TRUE(failed) << "the first fail-back did not fail: the drop did not hold\n" << t;
  EXPECT_TRUE(back) << t;
  EXPECT_GE(countMatches(t, "rank 0: rail 0 \\(rail0\\) up, [0-9]+ connection\\(s\\) that prefer it still elsewhere: fail-back again"), 1)
      << t;
  EXPECT_EQ(countMatches(t, "no path for"), 0) << t;
}

}  // namespace
