// The NCCL net plugin between two testbed hosts (2 rails each) while a last-hop link fails: the
// worker drives the plugin as NCCL's proxy does, both directions at once, 8 requests in flight,
// and checks every byte; a failover must leave every message whole and in order.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
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

class NcclNetFault : public reccl::test::failover::FailoverTest<2> {
 protected:
  // Starts the stream (WORKER_* in `workerEnv`) and waits until both ranks are connected, plus
  // 300 ms of traffic before any fault.
  std::unique_ptr<Job> startStream(const std::string& workerEnv, int timeoutSec = 120) {
    auto j = std::make_unique<Job>(testbed().name(), env(workerEnv), timeoutSec);
    EXPECT_TRUE(j->waitFor("started rank", 2, std::chrono::seconds(60))) << j->text();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return j;
  }
  // The run ended well: every message whole and in order, no rank in error, at least
  // `failovers` failovers over the ranks.
  void expectWholeStream(Job& j, uint64_t failovers) {
    expectAllOk(j, 2);
    std::string t = j.text();
    expectEveryMessageArrived(t);
    EXPECT_GE(sumField(t, "failovers"), failovers) << t;
    EXPECT_EQ(countMatches(t, "error rank"), 0) << t;
  }
  // Host 0's rail-0 switch port down for a second mid-stream, then back; `moves` failovers (one
  // per connection on that rail) before it comes back.
  void switchPortDownForASecond(const std::string& workerEnv, int moves) {
    auto j = startStream(kSeeFailovers + workerEnv + " WORKER_SECONDS=3");
    ASSERT_FALSE(HasFailure());
    link(false, 0, 0, true);
    bool movedAway = waitFailovers(*j, moves);
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    link(true, 0, 0, true);
    ASSERT_TRUE(movedAway) << j->text();
    expectWholeStream(*j, static_cast<uint64_t>(moves));
  }
};

TEST_F(NcclNetFault, ASwitchPortDownMidStreamLosesNoMessage) { switchPortDownForASecond("", 1); }

// As NCCL with four channels to a peer: four connections each way, messages spread over them,
// on the one fused device (each connection's channels over both rails).
TEST_F(NcclNetFault, ASwitchPortDownUnderFourConnectionsEachWayLosesNoMessage) {
  switchPortDownForASecond("RECCL_NET_DEVICES=fused WORKER_CONNS=4 WORKER_INFLIGHT=4", 4);
}

// A device per NIC (the default): the plugin lists rail0 and rail1. Rank 0 sends on device 1 and
// rank 1 on device 0, as NCCL's two ends may pick different NICs: rails still pair NICs of one
// name, and each sender's one channel starts on its device's NIC (rank 0's on rail1, rank 1's on
// rail0). Host 0's rail1 switch port goes down for a second: rank 0's connection moves onto
// rail0 and back once rail1 returns, rank 1's stays where it was; every message whole. Fused,
// the same host offers one device over both.
TEST_F(NcclNetFault, APerNicDeviceCarriesOnItsNicAndFailsOverToTheOther) {
  auto j = std::make_unique<Job>(testbed().name(), env(kSeeFailovers + "RECCL_DEBUG_SUBSYS=FAILOVER,NET WORKER_SECONDS=4"),
                                 120, 1, std::map<int, std::string>{{0, "WORKER_DEV=1"}, {1, "WORKER_DEV=0"}});
  ASSERT_TRUE(j->waitFor("started rank", 2, std::chrono::seconds(60))) << j->text();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(countMatches(j->text(), "devices 2: reccl:rail0 reccl:rail1"), 2) << j->text();
  link(false, 0, 1, true);
  bool movedAway = waitFailovers(*j, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  link(true, 0, 1, true);
  ASSERT_TRUE(movedAway) << j->text();
  expectWholeStream(*j, 1);
  const std::string t = j->text();
  // reccl's ranks are the connection's (0 sends, 1 receives); [rank N] is the worker's. One
  // channel each, made on its sender's device's rail.
  EXPECT_EQ(countMatches(t, "\\[rank 0\\][^\\n]* connected tcp rail1 rank 0->1 ch 0"), 1) << t;
  EXPECT_EQ(countMatches(t, "\\[rank 1\\][^\\n]* connected tcp rail0 rank 0->1 ch 0"), 1) << t;
  EXPECT_EQ(countMatches(t, "connected [^\\n]* ch 1"), 0) << "a second channel\n" << t;
  // Worker 0's connection (on rail1) moved onto rail0; worker 1's (on rail0) stayed.
  EXPECT_GE(countMatches(t, "failover (by peer )?of rank 0->1 ch 0 rail 1 \\(rail1\\) -> rail 0 \\(rail0\\)"), 1) << t;
  EXPECT_EQ(countMatches(t, "failover (by peer )?of rank 0->1 ch 0 rail 0 \\(rail0\\)"), 0) << t;
  // Rail1 back: worker 0's connection returns to its device's NIC.
  EXPECT_GE(countMatches(t, "fail-back of rank 0->1 ch 0 rail 0 \\(rail0\\) -> rail 1 \\(rail1\\)"), 1) << t;

  Job fused(testbed().name(), env("RECCL_NET_DEVICES=fused"), 60);
  EXPECT_TRUE(fused.waitFor("started rank", 2, std::chrono::seconds(60))) << fused.text();
  expectAllOk(fused, 2);
  EXPECT_EQ(countMatches(fused.text(), "devices 1: reccl:rail0\\+rail1"), 2) << fused.text();
}

// The host's own NIC goes down and stays down: the stream carries on over rail 1 to the end.
TEST_F(NcclNetFault, AHostNicDownForGoodLeavesTheStreamOnTheOtherRail) {
  auto j = startStream(kSeeFailovers + "WORKER_SECONDS=3");
  ASSERT_FALSE(HasFailure());
  link(false, 1, 0, false);
  ASSERT_TRUE(waitFailovers(*j, 1)) << j->text();
  expectWholeStream(*j, 0);
}

// Faults one after another at random (seeded; NCCL_NET_FAULT_SEED replays one): a host's NIC or
// its switch port, either host, either rail, down 150-700 ms with 150-500 ms between, one at a
// time, under four connections each way spread over the two per-NIC devices. Every message whole
// and in order, no error.
TEST_F(NcclNetFault, RandomLinkFaultsOneAfterAnotherLoseNoMessage) {
  const char* given = std::getenv("NCCL_NET_FAULT_SEED");
  const unsigned seed = given ? static_cast<unsigned>(std::strtoul(given, nullptr, 10))
                              : static_cast<unsigned>(std::random_device{}());
  SCOPED_TRACE("NCCL_NET_FAULT_SEED=" + std::to_string(seed));
  std::printf("NCCL_NET_FAULT_SEED=%u\n", seed);
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int faults = 8;
  auto j = startStream(kSeeFailovers + "WORKER_CONNS=4 WORKER_DEV=spread WORKER_INFLIGHT=4 WORKER_SECONDS=2", 180);
  ASSERT_FALSE(HasFailure());
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
  expectWholeStream(*j, static_cast<uint64_t>(faults));
}

// The same fault without reccl's failover fails the run: the fault does reach the traffic.
TEST_F(NcclNetFault, WithoutFailoverTheSameFaultFailsTheRun) {
  auto j = startStream("RECCL_FAILOVER=0 RECCL_TIMEOUT_MS=3000 WORKER_SECONDS=3");
  ASSERT_FALSE(HasFailure());
  link(false, 0, 0, true);
  bool failed = j->waitFor("error rank", 1, std::chrono::seconds(30));
  link(true, 0, 0, true);
  EXPECT_TRUE(failed) << j->text();
  EXPECT_NE(j->wait(), 0) << j->text();
}

}  // namespace
