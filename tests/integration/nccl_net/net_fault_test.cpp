// The NCCL net plugin between two testbed hosts (2 rails each) while a last-hop link fails: the
// worker drives the plugin as NCCL's proxy does, both directions at once, 8 requests in flight,
// and checks every byte; a failover must leave every message whole and in order.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <regex>
#include <string>
#include <thread>

#include "failover_job.h"

namespace {

using reccl::test::failover::countMatches;
using reccl::test::failover::Job;
using reccl::test::failover::sumField;
using reccl::test::failover::waitFailovers;
using NcclNetFault = reccl::test::failover::FailoverTest<2>;

// reccl's failover lines reach the worker through the plugin's NCCL logger.
const std::string kSeeFailovers = "WORKER_VERBOSE=1 RECCL_DEBUG=INFO RECCL_DEBUG_SUBSYS=FAILOVER ";

// "sent N" of one rank is "received N" of the other.
void expectEveryMessageArrived(const std::string& t) {
  std::regex done("done rank ([01]) sent ([0-9]+) received ([0-9]+)");
  uint64_t sent[2] = {0, 0}, received[2] = {0, 0};
  int ranks = 0;
  for (auto it = std::sregex_iterator(t.begin(), t.end(), done); it != std::sregex_iterator(); ++it, ++ranks) {
    int r = std::stoi((*it)[1]);
    sent[r] = std::stoull((*it)[2]);
    received[r] = std::stoull((*it)[3]);
  }
  ASSERT_EQ(ranks, 2) << t;
  EXPECT_EQ(sent[0], received[1]) << t;
  EXPECT_EQ(sent[1], received[0]) << t;
  EXPECT_GT(sent[0], 0u) << t;
}

// Host 0's rail-0 switch port goes down mid-stream for a second and comes back.
TEST_F(NcclNetFault, ASwitchPortDownMidStreamLosesNoMessage) {
  Job j(testbed().name(), env(kSeeFailovers + "WORKER_SECONDS=3"), 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(60))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  link(false, 0, 0, true);
  bool movedAway = waitFailovers(j, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  link(true, 0, 0, true);
  ASSERT_TRUE(movedAway) << j.text();
  expectAllOk(j, 2);
  std::string t = j.text();
  expectEveryMessageArrived(t);
  EXPECT_GE(sumField(t, "failovers"), 1u) << t;
  EXPECT_EQ(countMatches(t, "error rank"), 0) << t;
}

// As NCCL with four channels to a peer: four connections each way, messages spread over them.
TEST_F(NcclNetFault, ASwitchPortDownUnderFourConnectionsEachWayLosesNoMessage) {
  Job j(testbed().name(), env(kSeeFailovers + "WORKER_CONNS=4 WORKER_INFLIGHT=4 WORKER_SECONDS=3"), 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(60))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  link(false, 0, 0, true);
  bool movedAway = waitFailovers(j, 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  link(true, 0, 0, true);
  ASSERT_TRUE(movedAway) << j.text();
  expectAllOk(j, 2);
  std::string t = j.text();
  expectEveryMessageArrived(t);
  EXPECT_GE(sumField(t, "failovers"), 4u) << t;
  EXPECT_EQ(countMatches(t, "error rank"), 0) << t;
}

// The host's own NIC goes down and stays down: the stream carries on over rail 1 to the end.
TEST_F(NcclNetFault, AHostNicDownForGoodLeavesTheStreamOnTheOtherRail) {
  Job j(testbed().name(), env(kSeeFailovers + "WORKER_SECONDS=3"), 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(60))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  link(false, 1, 0, false);
  bool movedAway = waitFailovers(j, 1);
  ASSERT_TRUE(movedAway) << j.text();
  expectAllOk(j, 2);
  std::string t = j.text();
  expectEveryMessageArrived(t);
  EXPECT_EQ(countMatches(t, "error rank"), 0) << t;
}

// Faults one after another at random (seeded; NCCL_NET_FAULT_SEED replays one): a host's NIC or
// its switch port, either host, either rail, down 150-700 ms with 150-500 ms between, one at a
// time, under four connections each way. Every message whole and in order, no error.
TEST_F(NcclNetFault, RandomLinkFaultsOneAfterAnotherLoseNoMessage) {
  const char* given = std::getenv("NCCL_NET_FAULT_SEED");
  const unsigned seed = given ? static_cast<unsigned>(std::strtoul(given, nullptr, 10))
                              : static_cast<unsigned>(std::random_device{}());
  SCOPED_TRACE("NCCL_NET_FAULT_SEED=" + std::to_string(seed));
  std::printf("NCCL_NET_FAULT_SEED=%u\n", seed);
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int faults = 8;
  Job j(testbed().name(), env(kSeeFailovers + "WORKER_CONNS=4 WORKER_INFLIGHT=4 WORKER_SECONDS=2"), 180);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(60))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int f = 0; f < faults; ++f) {
    int host = pick(0, 1), rail = pick(0, 1);
    bool switchSide = pick(0, 1) == 1;
    int downMs = pick(150, 700), gapMs = pick(150, 500);
    // CLOCK_MONOTONIC ms, as the worker reports its longest gap.
    std::printf("fault %d at %.1f ms: host %d rail %d %s side, down %d ms\n", f,
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(),
                host, rail, switchSide ? "switch" : "host", downMs);
    link(false, host, rail, switchSide);
    std::this_thread::sleep_for(std::chrono::milliseconds(downMs));
    link(true, host, rail, switchSide);
    std::this_thread::sleep_for(std::chrono::milliseconds(gapMs));
  }
  expectAllOk(j, 2);
  std::string t = j.text();
  expectEveryMessageArrived(t);
  EXPECT_GE(sumField(t, "failovers"), static_cast<uint64_t>(faults)) << t;
  EXPECT_EQ(countMatches(t, "error rank"), 0) << t;
}

// The same fault without reccl's failover fails the run: the fault does reach the traffic.
TEST_F(NcclNetFault, WithoutFailoverTheSameFaultFailsTheRun) {
  Job j(testbed().name(), env("RECCL_FAILOVER=0 RECCL_TIMEOUT_MS=3000 WORKER_SECONDS=3"), 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(60))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  link(false, 0, 0, true);
  bool failed = j.waitFor("error rank", 1, std::chrono::seconds(30));
  link(true, 0, 0, true);
  EXPECT_TRUE(failed) << j.text();
  EXPECT_NE(j.wait(), 0) << j.text();
}

}  // namespace
