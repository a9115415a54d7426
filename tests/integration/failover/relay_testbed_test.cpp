// The relay route on the testbed: 2 hosts x 2 rails, 2 ranks per host (ranks 0,1 on host 0 and
// 2,3 on host 1). A real last-hop fault (switch port taken down with `ip link`) while the ranks
// run collective loops; the ranks whose rail failed forward their connections through the other
// rank of their host (shared-memory pipe + that rank's NIC). Every result is checked bit for bit
// by the worker against the fault-free closed form; the relay counters of recclCommGetStats
// (WORKER_RELAY_STATS) show the bytes really went through the relay rank.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "failover_job.h"

namespace {

using reccl::test::failover::countMatches;
using reccl::test::failover::Job;
using reccl::test::failover::sumField;

// "relay rank R migrations M forwarded B pipes P" -> per rank {M, B}.
std::map<int, std::pair<uint64_t, uint64_t>> relayStats(const std::string& text) {
  std::map<int, std::pair<uint64_t, uint64_t>> out;
  std::regex r("relay rank ([0-9]+) migrations ([0-9]+) forwarded ([0-9]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), r); it != std::sregex_iterator(); ++it)
    out[std::stoi((*it)[1])] = {std::stoull((*it)[2]), std::stoull((*it)[3])};
  return out;
}

// Connections named in "<conn> relayed via rank R" lines.
std::set<std::string> relayedConns(const std::string& text) {
  std::set<std::string> out;
  std::regex r("(rank [0-9]+->[0-9]+ ch [0-9]+) relayed via rank");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), r); it != std::sregex_iterator(); ++it)
    out.insert((*it)[1]);
  return out;
}

// The failover fixture (2 hosts x 2 rails, every rail back up after each test) with 2 ranks per
// host and faults at the switch port h<host>r<rail> in the fabric: the host's last hop.
class Relay : public reccl::test::failover::FailoverTest<2> {
 protected:
  using Base = reccl::test::failover::FailoverTest<2>;
  static constexpr int kRanks = 4;
  static void linkSwitch(bool up, int host, int rail) { Base::link(up, host, rail, true); }
  static std::string relayEnv(const std::string& extra) {
    // NIC poll as the fault source: four ranks loading BPF at once on a busy machine take seconds
    // before their detectors run; routing, not detection, is under test here. (Later settings
    // win: `extra` may override these.)
    return Base::env("RECCL_DETECTOR=poll WORKER_RELAY_STATS=1 " + extra);
  }
  // Starts the 4 ranks, lets the collective loop run 400 ms, then host `host` loses `rail`.
  void startThenFail(std::unique_ptr<Job>* j, const std::string& extra, int host, int rail) {
    *j = std::make_unique<Job>(testbed().name(), relayEnv(extra), 120, 2);
    ASSERT_TRUE((*j)->waitFor("started rank", kRanks, std::chrono::seconds(40))) << (*j)->text();
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    linkSwitch(false, host, rail);
  }
  static std::string finish(Job& j) {
    Base::expectAllOk(j, kRanks);
    return j.text();
  }
  // Every rank reported its relay counters, all zero, and no connection was relayed.
  static void expectNothingRelayed(const std::string& t) {
    auto st = relayStats(t);
    ASSERT_EQ(st.size(), 4u) << t;
    for (auto& [r, v] : st) EXPECT_EQ(v.first + v.second, 0u) << "rank " << r << "\n" << t;
    EXPECT_EQ(countMatches(t, "relayed via rank"), 0) << t;
  }
};

// route=relay: host 0 loses rail 0. Rank 1 (sender of 1->2 ch 1) and rank 0 (receiver of
// 3->0 ch 1, and both ends of its rank-0<->2 connections) move onto the other rank of host 0,
// whose NIC on rail 1 carries the bytes; both ranks forward for each other.
TEST_F(Relay, ForcedRelayAsSenderAndReceiver) {
  std::unique_ptr<Job> j;
  ASSERT_NO_FATAL_FAILURE(startThenFail(&j, "RECCL_FAILOVER_ROUTE=relay WORKER_ITERS=120", 0, 0));
  std::string t = finish(*j);
  auto st = relayStats(t);
  ASSERT_EQ(st.size(), 4u) << t;
  // Both host-0 ranks moved connections onto a relay and forwarded real traffic for the other.
  EXPECT_GE(st[0].first, 1u) << t;
  EXPECT_GE(st[1].first, 1u) << t;
  EXPECT_GT(st[0].second, 1u << 20) << t;
  EXPECT_GT(st[1].second, 1u << 20) << t;
  // Host 1 saw ordinary migrations and relayed nothing.
  EXPECT_EQ(st[2].first + st[3].first + st[2].second + st[3].second, 0u) << t;
  // Sender and receiver roles: 1->2 ch 1 originates at its sender, 3->0 ch 1 at its receiver.
  auto conns = relayedConns(t);
  EXPECT_TRUE(conns.count("rank 1->2 ch 1")) << t;
  EXPECT_TRUE(conns.count("rank 3->0 ch 1")) << t;
  EXPECT_GE(countMatches(t, "relaying rank [0-9]+->[0-9]+ ch [0-9]+ for rank [01] over rail 1"), 2) << t;
}

// The same with in-place allreduce and direct data paths on every step: a relay pipe takes whole
// frames from the slots (SendPort::frame copies a direct step's payload in first), and a step
// overwritten in place after its receipt is never needed again.
TEST_F(Relay, ForcedRelayInPlaceAllreduceDirectPaths) {
  std::unique_ptr<Job> j;
  ASSERT_NO_FATAL_FAILURE(startThenFail(&j,
                                        "RECCL_FAILOVER_ROUTE=relay WORKER_INPLACE=1 RECCL_DIRECT_SEND_MIN_BYTES=1 "
                                        "RECCL_DIRECT_RECV_MIN_BYTES=1 WORKER_ITERS=120",
                                        0, 0));
  std::string t = finish(*j);
  auto st = relayStats(t);
  ASSERT_EQ(st.size(), 4u) << t;
  EXPECT_GE(st[0].first + st[1].first, 1u) << t;
  EXPECT_GT(st[0].second + st[1].second, 1u << 20) << t;
}

// The relays' own rail turns gray while they forward: host 0 loses rail 0 (its two ranks relay
// through each other on rail 1), then rail 1 drops 1 % at host 0 until the detectors there mark it
// DEGRADED and the relays break their pipes on it. Each origin then moves its connection directly
// onto rail 1 (degraded, but the only rail left). A relay's socket to the peer must stay open
// until that move reached the peer: closed first, the peer reads the close as the origin's end
// (there is no move under way at the peer yet) and fails the communicator; a gray rail still
// carries the close.
TEST_F(Relay, ARelayWhoseRailTurnsGrayLeavesThePeerItsSocketUntilTheOriginMoved) {
  std::unique_ptr<Job> j;
  ASSERT_NO_FATAL_FAILURE(startThenFail(
      &j, "RECCL_FAILOVER_ROUTE=relay RECCL_DETECTOR=bpf RECCL_DEGRADED_CLEAR_MS=60000 WORKER_SECONDS=1", 0, 0));
  bool relayed = j->waitForMatch("relayed via rank", 2, std::chrono::seconds(30));
  int dropped = relayed ? reccl::test::failover::dropOnRail(netns(0), "rail1", true, "0.01") : -1;
  bool broke = dropped == 0 && j->waitForMatch("relay rank [01] lost its connection to the peer", 1, std::chrono::seconds(40));
  // Cleared before any assertion: the testbed serves the suite's next tests.
  int cleared = dropped == 0 ? reccl::test::failover::dropOnRail(netns(0), "rail1", false, "0") : 0;
  ASSERT_TRUE(relayed) << j->text();
  ASSERT_EQ(dropped, 0);
  EXPECT_EQ(cleared, 0);
  ASSERT_TRUE(broke) << j->text();
  // Two more seconds of allreduces over the moved connections before the run may end.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::string t = finish(*j);
  EXPECT_EQ(countMatches(t, "with no migration in progress here"), 0) << t;
}

// route=auto under NIC affinity, one channel: rank 1 uses only its own NIC (rail 1); when host 0
// loses rail 1 it relays through rank 0, while rank 0 (whose own NIC is rail 0) moves directly.
TEST_F(Relay, AutoRelaysUnderNicAffinity) {
  std::unique_ptr<Job> j;
  ASSERT_NO_FATAL_FAILURE(
      startThenFail(&j, "RECCL_FAILOVER_ROUTE=auto RECCL_NIC_AFFINITY=1 RECCL_NCHANNELS=1 WORKER_ITERS=120", 0, 1));
  std::string t = finish(*j);
  auto st = relayStats(t);
  ASSERT_EQ(st.size(), 4u) << t;
  EXPECT_GE(st[1].first, 1u) << t;           // rank 1 relayed
  EXPECT_GT(st[0].second, 1u << 20) << t;    // through rank 0
  EXPECT_EQ(st[0].first, 0u) << t;           // rank 0 stayed direct
  EXPECT_TRUE(relayedConns(t).count("rank 1->2 ch 0")) << t;
  EXPECT_GE(countMatches(t, "rank 0: failover of rank 3->0 ch 0 rail [0-9]+ \\([^)]*\\) -> rail 0"), 1) << t;
}

// route=direct under the same NIC affinity: where auto relays (above), rank 1 moves its connection
// onto host 0's other NIC itself; nothing is relayed anywhere.
TEST_F(Relay, DirectUnderNicAffinityMovesOntoTheOtherNic) {
  std::unique_ptr<Job> j;
  ASSERT_NO_FATAL_FAILURE(
      startThenFail(&j, "RECCL_FAILOVER_ROUTE=direct RECCL_NIC_AFFINITY=1 RECCL_NCHANNELS=1 WORKER_ITERS=120", 0, 1));
  std::string t = finish(*j);
  ASSERT_NO_FATAL_FAILURE(expectNothingRelayed(t));
  EXPECT_GE(countMatches(t, "rank 1: failover of rank 1->2 ch 0 rail [0-9]+ \\([^)]*\\) -> rail 0"), 1) << t;
}

// route=auto without affinity: every rank may use either NIC, so everything moves directly.
TEST_F(Relay, AutoIsDirectWithoutAffinity) {
  std::unique_ptr<Job> j;
  ASSERT_NO_FATAL_FAILURE(startThenFail(&j, "RECCL_FAILOVER_ROUTE=auto RECCL_NCHANNELS=1 WORKER_ITERS=120", 0, 1));
  std::string t = finish(*j);
  ASSERT_NO_FATAL_FAILURE(expectNothingRelayed(t));
  EXPECT_GE(sumField(t, "failovers"), 2u) << t;
}

// Relay, then the rail comes back: after the hold-down every relayed connection moves back to
// its own rank's NIC (fail-back), and the job runs on with exact results.
TEST_F(Relay, RelayThenFailBack) {
  std::unique_ptr<Job> j;
  ASSERT_NO_FATAL_FAILURE(startThenFail(&j, "RECCL_FAILOVER_ROUTE=relay WORKER_SECONDS=5 WORKER_COUNT=262144", 0, 0));
  ASSERT_TRUE(j->waitFor("relayed via rank", 2, std::chrono::seconds(30))) << j->text();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  linkSwitch(true, 0, 0);
  // The run ends once every relayed connection has failed back (or the deadline).
  for (const auto& c : relayedConns(j->text()))
    EXPECT_TRUE(j->waitForMatch("fail-back of " + c + " rail [0-9]+ \\([^)]*\\) -> rail 0", 1, std::chrono::seconds(30))) << c;
  std::string t = finish(*j);
  auto conns = relayedConns(t);
  ASSERT_GE(conns.size(), 2u) << t;
  for (const auto& c : conns) EXPECT_GE(countMatches(t, "fail-back of " + c + " rail [0-9]+ \\([^)]*\\) -> rail 0"), 1) << c << "\n" << t;
  EXPECT_GE(sumField(t, "failbacks"), conns.size()) << t;
}

// The far end's own rail fails while it is served by a relay: host 0 loses rail 0 (relay over
// rail 1), its rail 0 comes back but stays held down here (long hold-down), then host 1 loses
// rail 1. The host-1 ranks move their connections themselves (to rail 0, physically up again),
// which retires the relay pipes at host 0; results stay exact.
TEST_F(Relay, FarEndRailFailsWhileRelayed) {
  std::unique_ptr<Job> j;
  ASSERT_NO_FATAL_FAILURE(
      startThenFail(&j, "RECCL_HOLDDOWN_MS=20000 RECCL_FAILOVER_ROUTE=relay WORKER_SECONDS=5 WORKER_COUNT=262144", 0, 0));
  ASSERT_TRUE(j->waitFor("relayed via rank", 2, std::chrono::seconds(30))) << j->text();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  linkSwitch(true, 0, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  linkSwitch(false, 1, 1);
  // The run ends once both ends have moved (or the deadline).
  EXPECT_TRUE(j->waitForMatch("rank [23]: failover of rank [0-9]+->[0-9]+ ch [0-9]+ rail [0-9]+ \\([^)]*\\) -> rail 0", 1,
                              std::chrono::seconds(30)));
  EXPECT_TRUE(j->waitForMatch("rank [01]: failover by peer of rank [0-9]+->[0-9]+ ch [0-9]+ rail [0-9]+ \\([^)]*\\) -> rail 0", 1,
                              std::chrono::seconds(30)));
  std::string t = finish(*j);
  EXPECT_GE(countMatches(t, "rank [23]: failover of rank [0-9]+->[0-9]+ ch [0-9]+ rail [0-9]+ \\([^)]*\\) -> rail 0"), 1) << t;
  // The relayed connections were taken over by their far ends (passive at host 0).
  EXPECT_GE(countMatches(t, "rank [01]: failover by peer of rank [0-9]+->[0-9]+ ch [0-9]+ rail [0-9]+ \\([^)]*\\) -> rail 0"), 1) << t;
}

}  // namespace
