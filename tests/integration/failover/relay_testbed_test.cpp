// The relay route on the testbed: 2 hosts x 2 rails, 2 ranks per host (ranks 0,1 on host 0 and
// 2,3 on host 1). A real last-hop fault (switch port taken down with `ip link`) while the ranks
// run collective loops; the ranks whose rail failed forward their connections through the other
// rank of their host (shared-memory pipe + that rank's NIC). Every result is checked bit for bit
// by the worker against the fault-free closed form; the relay counters of recclCommGetStats
// (WORKER_RELAY_STATS) show the bytes really went through the relay rank.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "testbed_fixture.h"

namespace {

using Clock = std::chrono::steady_clock;

// One `reccl testbed run` of the failover worker, read line by line on a thread.
class Job {
 public:
  Job(const std::string& name, const std::string& env, int timeoutSec, int ranksPerHost) {
    std::string cmd = std::string(RECCL_CLI_PATH) + " testbed run --name " + name + " --ranks-per-host " +
                      std::to_string(ranksPerHost) + " --timeout " + std::to_string(timeoutSec) +
                      " -- /usr/bin/env " + env + " " + RECCL_FAILOVER_WORKER_PATH + " 2>&1";
    pipe_ = popen(cmd.c_str(), "r");
    reader_ = std::thread([this] {
      char buf[4096];
      while (pipe_ && fgets(buf, sizeof(buf), pipe_)) {
        std::lock_guard lk(mu_);
        text_ += buf;
        cv_.notify_all();
      }
    });
  }
  ~Job() { wait(); }
  bool waitFor(const std::string& re, int n, std::chrono::seconds limit) {
    std::regex r(re);
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, limit, [&] {
      return std::distance(std::sregex_iterator(text_.begin(), text_.end(), r), std::sregex_iterator()) >= n;
    });
  }
  int wait() {
    if (reader_.joinable()) reader_.join();
    if (pipe_) {
      int st = pclose(pipe_);
      pipe_ = nullptr;
      code_ = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    return code_;
  }
  std::string text() {
    std::lock_guard lk(mu_);
    return text_;
  }

 private:
  FILE* pipe_ = nullptr;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
  int code_ = -1;
};

int countMatches(const std::string& text, const std::string& re) {
  std::regex r(re);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), r), std::sregex_iterator()));
}

// "relay rank R migrations M forwarded B pipes P" -> per rank {M, B}.
std::map<int, std::pair<uint64_t, uint64_t>> relayStats(const std::string& text) {
  std::map<int, std::pair<uint64_t, uint64_t>> out;
  std::regex r("relay rank ([0-9]+) migrations ([0-9]+) forwarded ([0-9]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), r); it != std::sregex_iterator(); ++it)
    out[std::stoi((*it)[1])] = {std::stoull((*it)[2]), std::stoull((*it)[3])};
  return out;
}

uint64_t sumField(const std::string& text, const std::string& field) {
  std::regex r(field + " ([0-9]+)");
  uint64_t s = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), r); it != std::sregex_iterator(); ++it)
    s += std::stoull((*it)[1]);
  return s;
}

// Connections named in "<conn> relayed via rank R" lines.
std::set<std::string> relayedConns(const std::string& text) {
  std::set<std::string> out;
  std::regex r("(rank [0-9]+->[0-9]+ ch [0-9]+) relayed via rank");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), r); it != std::sregex_iterator(); ++it)
    out.insert((*it)[1]);
  return out;
}

class Relay : public reccl::test::TestbedTest<2, 2> {
 protected:
  void TearDown() override {
    if (!skipReason_.empty() || !tb_) return;
    for (int h = 0; h < 2; ++h)
      for (int r = 0; r < 2; ++r) link(true, h, r);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  // The switch port h<host>r<rail> in the fabric: the host's last hop on that rail.
  static void link(bool up, int host, int rail) {
    std::string cmd = "ip -n " + fabricNetns() + " link set h" + std::to_string(host) + "r" + std::to_string(rail) +
                      (up ? " up" : " down");
    int rc = system(cmd.c_str());
    ASSERT_EQ(rc, 0) << cmd;
  }
  static std::string env(const std::string& extra) {
    // NIC poll as the fault source: four ranks loading BPF at once on a busy machine take seconds
    // before their detectors run; routing, not detection, is under test here.
    return "RECCL_DETECTOR=poll RECCL_TIMEOUT_MS=30000 RECCL_STALL_TIMEOUT_MS=1000 RECCL_HOLDDOWN_MS=300 "
           "WORKER_RELAY_STATS=1 " + extra;
  }
  static std::string finish(Job& j) {
    int code = j.wait();
    std::string t = j.text();
    if (getenv("FAILOVER_TEST_VERBOSE")) printf("%s", t.c_str());
    EXPECT_EQ(code, 0) << t;
    EXPECT_EQ(countMatches(t, "done rank [0-9]+"), 4) << t;
    return t;
  }
};

// route=relay: host 0 loses rail 0. Rank 1 (sender of 1->2 ch 1) and rank 0 (receiver of
// 3->0 ch 1, and both ends of its rank-0<->2 connections) move onto the other rank of host 0,
// whose NIC on rail 1 carries the bytes; both ranks forward for each other.
TEST_F(Relay, ForcedRelayAsSenderAndReceiver) {
  Job j(testbed().name(), env("RECCL_FAILOVER_ROUTE=relay WORKER_ITERS=120"), 120, 2);
  ASSERT_TRUE(j.waitFor("started rank", 4, std::chrono::seconds(40))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  link(false, 0, 0);
  std::string t = finish(j);
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
  Job j(testbed().name(),
        env("RECCL_FAILOVER_ROUTE=relay WORKER_INPLACE=1 RECCL_DIRECT_SEND_MIN_BYTES=1 "
            "RECCL_DIRECT_RECV_MIN_BYTES=1 WORKER_ITERS=120"),
        120, 2);
  ASSERT_TRUE(j.waitFor("started rank", 4, std::chrono::seconds(40))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  link(false, 0, 0);
  std::string t = finish(j);
  auto st = relayStats(t);
  ASSERT_EQ(st.size(), 4u) << t;
  EXPECT_GE(st[0].first + st[1].first, 1u) << t;
  EXPECT_GT(st[0].second + st[1].second, 1u << 20) << t;
}

// route=auto under NIC affinity, one channel: rank 1 uses only its own NIC (rail 1); when host 0
// loses rail 1 it relays through rank 0, while rank 0 (whose own NIC is rail 0) moves directly.
TEST_F(Relay, AutoRelaysUnderNicAffinity) {
  Job j(testbed().name(),
        env("RECCL_FAILOVER_ROUTE=auto RECCL_NIC_AFFINITY=1 RECCL_NCHANNELS=1 WORKER_ITERS=120"), 120, 2);
  ASSERT_TRUE(j.waitFor("started rank", 4, std::chrono::seconds(40))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  link(false, 0, 1);
  std::string t = finish(j);
  auto st = relayStats(t);
  ASSERT_EQ(st.size(), 4u) << t;
  EXPECT_GE(st[1].first, 1u) << t;           // rank 1 relayed
  EXPECT_GT(st[0].second, 1u << 20) << t;    // through rank 0
  EXPECT_EQ(st[0].first, 0u) << t;           // rank 0 stayed direct
  EXPECT_TRUE(relayedConns(t).count("rank 1->2 ch 0")) << t;
  EXPECT_GE(countMatches(t, "rank 0: failover of rank 3->0 ch 0 -> rail 0"), 1) << t;
}

// route=auto without affinity: every rank may use either NIC, so everything moves directly.
TEST_F(Relay, AutoIsDirectWithoutAffinity) {
  Job j(testbed().name(), env("RECCL_FAILOVER_ROUTE=auto RECCL_NCHANNELS=1 WORKER_ITERS=120"), 120, 2);
  ASSERT_TRUE(j.waitFor("started rank", 4, std::chrono::seconds(40))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  link(false, 0, 1);
  std::string t = finish(j);
  auto st = relayStats(t);
  ASSERT_EQ(st.size(), 4u) << t;
  for (auto& [r, v] : st) EXPECT_EQ(v.first + v.second, 0u) << "rank " << r << "\n" << t;
  EXPECT_GE(sumField(t, "failovers"), 2u) << t;
  EXPECT_EQ(countMatches(t, "relayed via rank"), 0) << t;
}

// Relay, then the rail comes back: after the hold-down every relayed connection moves back to
// its own rank's NIC (fail-back), and the job runs on with exact results.
TEST_F(Relay, RelayThenFailBack) {
  Job j(testbed().name(), env("RECCL_FAILOVER_ROUTE=relay WORKER_SECONDS=5 WORKER_COUNT=262144"), 120, 2);
  ASSERT_TRUE(j.waitFor("started rank", 4, std::chrono::seconds(40))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  link(false, 0, 0);
  ASSERT_TRUE(j.waitFor("relayed via rank", 2, std::chrono::seconds(10))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  link(true, 0, 0);
  std::string t = finish(j);
  auto conns = relayedConns(t);
  ASSERT_GE(conns.size(), 2u) << t;
  for (const auto& c : conns) EXPECT_GE(countMatches(t, "fail-back of " + c + " -> rail 0"), 1) << c << "\n" << t;
  EXPECT_GE(sumField(t, "failbacks"), conns.size()) << t;
}

// The far end's own rail fails while it is served by a relay: host 0 loses rail 0 (relay over
// rail 1), its rail 0 comes back but stays held down here (long hold-down), then host 1 loses
// rail 1. The host-1 ranks move their connections themselves (to rail 0, physically up again),
// which retires the relay pipes at host 0; results stay exact.
TEST_F(Relay, FarEndRailFailsWhileRelayed) {
  Job j(testbed().name(),
        "RECCL_DETECTOR=poll RECCL_TIMEOUT_MS=30000 RECCL_STALL_TIMEOUT_MS=1000 RECCL_HOLDDOWN_MS=20000 "
        "WORKER_RELAY_STATS=1 "
        "RECCL_FAILOVER_ROUTE=relay WORKER_SECONDS=5 WORKER_COUNT=262144",
        120, 2);
  ASSERT_TRUE(j.waitFor("started rank", 4, std::chrono::seconds(40))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  link(false, 0, 0);
  ASSERT_TRUE(j.waitFor("relayed via rank", 2, std::chrono::seconds(10))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  link(true, 0, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  link(false, 1, 1);
  std::string t = finish(j);
  EXPECT_GE(countMatches(t, "rank [23]: failover of rank [0-9]+->[0-9]+ ch [0-9]+ -> rail 0"), 1) << t;
  // The relayed connections were taken over by their far ends (passive at host 0).
  EXPECT_GE(countMatches(t, "rank [01]: failover by peer of rank [0-9]+->[0-9]+ ch [0-9]+ -> rail 0"), 1) << t;
}

}  // namespace
