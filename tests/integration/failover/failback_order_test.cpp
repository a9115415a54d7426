// A rail that comes back takes back the connections that prefer it as a fail-back, also those
// that sit on a gray (DEGRADED) rail meanwhile; only the rest of what stayed on the gray rail is
// moved by weight (reason degraded). Real faults on the 2-host x 2-rail testbed: host 0's rail 1
// is pulled at the switch (its connections move to rail 0), rail 0 then drops 1 % of what host 0
// sends (the in-process BPF detector's retransmit hook marks it DEGRADED, nothing healthy is
// left, so the connections stay on it), then rail 1 comes back. Results are checked bit for bit by the
// worker.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "failover_job.h"

namespace {

using reccl::test::failover::countMatches;
using reccl::test::failover::Job;
using reccl::test::failover::onePercentDropOnRail0;
using FailoverFailBackOrder = reccl::test::failover::FailoverTest<2>;

TEST_F(FailoverFailBackOrder, PreferredRailComesBackFromAGrayRailAsFailBack) {
  Job j(testbed().name(),
        env("RECCL_DETECTOR=bpf RECCL_DEBUG=INFO RECCL_DEBUG_SUBSYS=FAILOVER RECCL_DEGRADED_CLEAR_MS=60000 "
            "RECCL_FAILOVER_TIMEOUT_MS=3000 WORKER_SECONDS=14"),
        120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
  // The retransmit hook is BPF: wait until both ranks' detectors run.
  ASSERT_TRUE(j.waitFor("fault source: in-process detector", 2, std::chrono::seconds(20))) << j.text();
  link(false, 0, 1, true);
  ASSERT_TRUE(j.waitForMatch("rank 0: failover (by peer )?of .* -> rail 0 \\(rail0\\) epoch [0-9]+: reason link-down", 1,
                             std::chrono::seconds(5)))
      << j.text();
  // Both directions: only what the host sends (`--side host --egress`) was not declared DEGRADED
  // within 8 s here.
  ASSERT_EQ(onePercentDropOnRail0(netns(0), true), 0);
  bool gray = j.waitForMatch("rank [01]: rail 0 \\(rail0\\) degraded \\(source detector", 1, std::chrono::seconds(10));
  bool stayed = gray && j.waitForMatch("rank [01]: rank [01]->[01] ch [0-9]+: rail 0 degraded and no healthy rail to move to",
                                       1, std::chrono::seconds(3));
  // Both ends retransmit; the first DEGRADED wins (the other end then holds its own as explained
  // by the peer's report). The case under test needs it at rank 0, where rail 1 comes back.
  bool rank0Gray = countMatches(j.text(), "rank 0: rail 0 \\(rail0\\) degraded \\(source detector") > 0;
  int clear = onePercentDropOnRail0(netns(0), false);
  link(true, 0, 1, true);
  // Rank 0 is where rail 1 comes back: what prefers rail 1 goes home as a fail-back.
  bool failedBack = j.waitForMatch("rank 0: fail-back of rank [01]->[01] ch [0-9]+ -> rail 1", 1,
                                   std::chrono::seconds(5));
  expectAllOk(j, 2);
  EXPECT_EQ(clear, 0);
  std::string t = j.text();
  ASSERT_TRUE(gray) << t;
  ASSERT_TRUE(stayed) << t;
  if (!rank0Gray)
    GTEST_SKIP() << "rank 1's detector, not rank 0's, marked rail 0 degraded first: rank 0 never sat on a gray rail "
                    "(both ends see the loss; which one declares first is the machine's timing)";
  EXPECT_TRUE(failedBack) << t;
  // Every connection rank 0 moved off rail 1 at the fault prefers rail 1: each comes back as a
  // fail-back, none of them by weight.
  int moved = countMatches(t, "rank 0: failover (by peer )?of rank [01]->[01] ch [0-9]+ -> rail 0 \\(rail0\\) epoch [0-9]+: reason link-down");
  EXPECT_GE(countMatches(t, "rank 0: fail-back of rank [01]->[01] ch [0-9]+ -> rail 1"), moved) << t;
  EXPECT_EQ(countMatches(t, "no path for"), 0) << t;
}

}  // namespace
