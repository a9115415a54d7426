// Failover on the testbed (2 hosts x 2 rails, one rank per host, one channel per rail): real
// last-hop faults (switch port or host NIC taken down with `ip link`) while ranks run collective
// loops; every result is checked bit for bit by the worker against the fault-free closed form.
#include <gtest/gtest.h>
#include <map>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
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
  Job(const std::string& name, const std::string& env, int timeoutSec, int ranksPerHost = 1) {
    std::string cmd = std::string(RECCL_CLI_PATH) + " testbed run --name " + name + " --ranks-per-host " +
                      std::to_string(ranksPerHost) + " --timeout " + std::to_string(timeoutSec) +
                      " -- /usr/bin/env " + env + " " + RECCL_FAILOVER_WORKER_PATH + " 2>&1";
    pipe_ = popen(cmd.c_str(), "r");
    reader_ = std::thread([this] {
      char buf[4096];
      while (pipe_ && fgets(buf, sizeof(buf), pipe_)) {
        std::lock_guard lk(mu_);
        std::string line(buf);
        lines_.push_back({Clock::now(), line});
        text_ += line;
        cv_.notify_all();
      }
    });
  }
  ~Job() { wait(); }
  // Waits until `n` lines contain `what` (or the deadline); true when they did.
  bool waitFor(const std::string& what, int n, std::chrono::seconds limit) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, limit, [&] {
      int k = 0;
      for (auto& [t, l] : lines_) k += l.find(what) != std::string::npos;
      return k >= n;
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
  // Time of the first line matching `re` for each rank number captured by its group 1.
  std::map<int, Clock::time_point> firstPerRank(const std::string& re) {
    std::lock_guard lk(mu_);
    std::map<int, Clock::time_point> out;
    std::regex r(re);
    for (auto& [t, l] : lines_) {
      std::smatch m;
      if (std::regex_search(l, m, r)) out.emplace(std::stoi(m[1]), t);
    }
    return out;
  }

 private:
  FILE* pipe_ = nullptr;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<Clock::time_point, std::string>> lines_;
  std::string text_;
  int code_ = -1;
};

uint64_t sumField(const std::string& text, const std::string& field) {
  std::regex r(field + " ([0-9]+)");
  uint64_t s = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), r); it != std::sregex_iterator(); ++it)
    s += std::stoull((*it)[1]);
  return s;
}

int countMatches(const std::string& text, const std::string& re) {
  std::regex r(re);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), r), std::sregex_iterator()));
}

class Failover : public reccl::test::TestbedTest<2, 2> {
 protected:
  void TearDown() override {
    if (!skipReason_.empty() || !tb_) return;
    // Every rail back up for the next test, and time for the carrier to settle.
    for (int h = 0; h < 2; ++h)
      for (int r = 0; r < 2; ++r) {
        link(true, h, r, true);
        link(true, h, r, false);
      }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  // switchSide: the switch port h<h>r<r> in the fabric; else the host's own NIC rail<r>.
  static void link(bool up, int host, int rail, bool switchSide) {
    std::string ns = switchSide ? fabricNetns() : netns(host);
    std::string dev = switchSide ? "h" + std::to_string(host) + "r" + std::to_string(rail) : "rail" + std::to_string(rail);
    std::string cmd = "ip -n " + ns + " link set " + dev + (up ? " up" : " down");
    int rc = system(cmd.c_str());
    ASSERT_EQ(rc, 0) << cmd;
  }
  static std::string env(const std::string& extra) {
    return "RECCL_TIMEOUT_MS=30000 RECCL_STALL_TIMEOUT_MS=1000 RECCL_HOLDDOWN_MS=300 " + extra;
  }
  static void expectAllOk(Job& j, int ranks) {
    int code = j.wait();
    std::string t = j.text();
    if (getenv("FAILOVER_TEST_VERBOSE")) printf("%s", t.c_str());
    EXPECT_EQ(code, 0) << t;
    EXPECT_EQ(countMatches(t, "done rank [0-9]+"), ranks) << t;
  }
};

// A switch port dies mid-allreduce: host 0's rail 0 (its connections' sender and receiver ends).
TEST_F(Failover, SwitchSideLinkDownRail0MidAllreduce) {
  Job j(testbed().name(), env("WORKER_ITERS=150"), 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  link(false, 0, 0, true);
  expectAllOk(j, 2);
  std::string t = j.text();
  EXPECT_GE(sumField(t, "failovers"), 2u) << t;  // both directions of the pair on rail 0
  EXPECT_GE(countMatches(t, "failover of rank"), 1) << t;
}

// The same on rail 1 at the other host.
TEST_F(Failover, SwitchSideLinkDownRail1OtherHost) {
  Job j(testbed().name(), env("WORKER_ITERS=150"), 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  link(false, 1, 1, true);
  expectAllOk(j, 2);
  EXPECT_GE(sumField(j.text(), "failovers"), 2u) << j.text();
}

// The host's own NIC goes admin down.
TEST_F(Failover, HostSideLinkDownMidAllreduce) {
  Job j(testbed().name(), env("WORKER_ITERS=150"), 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  link(false, 0, 1, false);
  expectAllOk(j, 2);
  EXPECT_GE(sumField(j.text(), "failovers"), 2u) << j.text();
}

// In-band detection only (no NIC poll): the stall check finds the dead path at both ends.
TEST_F(Failover, InBandOnlyStallDetection) {
  Job j(testbed().name(), env("RECCL_DETECTOR=none RECCL_STALL_TIMEOUT_MS=300 WORKER_ITERS=150"), 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  link(false, 1, 0, true);
  expectAllOk(j, 2);
  std::string t = j.text();
  EXPECT_GE(sumField(t, "failovers"), 2u) << t;
  EXPECT_GE(countMatches(t, "source stall"), 1) << t;
}

// Each detection source on its own: the in-process detector with rtnetlink only (unprivileged
// fallback), and the NIC poll (no detector).
TEST_F(Failover, RtnetlinkDetectorSource) {
  Job j(testbed().name(), env("RECCL_DETECTOR=netlink WORKER_ITERS=120"), 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  link(false, 1, 0, true);
  expectAllOk(j, 2);
  EXPECT_GE(countMatches(j.text(), "source detector rtnetlink"), 1) << j.text();
  EXPECT_GE(sumField(j.text(), "failovers"), 2u) << j.text();
}

TEST_F(Failover, NicPollSource) {
  Job j(testbed().name(), env("RECCL_DETECTOR=poll WORKER_ITERS=120"), 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  link(false, 0, 1, true);
  expectAllOk(j, 2);
  EXPECT_GE(countMatches(j.text(), "source nic-poll"), 1) << j.text();
}

// A short seeded random soak: faults on random rails/hosts/sides, some repaired, collectives
// cycling; zero wrong results, zero hangs. RECCL_SOAK_SEED / RECCL_SOAK_SECONDS override.
TEST_F(Failover, SeededRandomSoak) {
  unsigned seed = getenv("RECCL_SOAK_SEED") ? static_cast<unsigned>(atoi(getenv("RECCL_SOAK_SEED"))) : 20261129u;
  int secs = getenv("RECCL_SOAK_SECONDS") ? atoi(getenv("RECCL_SOAK_SECONDS")) : 40;
  Job j(testbed().name(), env("WORKER_COLL=all WORKER_COUNT=262144 WORKER_SECONDS=" + std::to_string(secs)),
        secs + 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
  std::mt19937 rng(seed);
  auto end = Clock::now() + std::chrono::seconds(secs - 3);
  bool down[2][2] = {};
  int faults = 0;
  while (Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 800));
    int h = rng() % 2, r = rng() % 2;
    bool sw = rng() % 2;
    // Never take the last rail of the pair: every fault must be survivable.
    bool otherDown = down[0][1 - r] || down[1][1 - r];
    if (!down[h][r] && !otherDown) {
      link(false, h, r, sw);
      link(false, h, r, !sw);  // normalize: both sides down, whichever the test picked first
      down[h][r] = true;
      ++faults;
    } else if (down[h][r]) {
      link(true, h, r, true);
      link(true, h, r, false);
      down[h][r] = false;
    }
  }
  for (int h = 0; h < 2; ++h)
    for (int r = 0; r < 2; ++r)
      if (down[h][r]) {
        link(true, h, r, true);
        link(true, h, r, false);
      }
  expectAllOk(j, 2);
  EXPECT_GE(faults, 3) << "seed " << seed;
  EXPECT_GE(sumField(j.text(), "failovers"), 2u) << "seed " << seed << "\n" << j.text();
}

// Every collective, one after the other, with a rail failing in the middle.
TEST_F(Failover, EveryCollectiveAcrossALinkDown) {
  Job j(testbed().name(), env("WORKER_COLL=all WORKER_ITERS=240 WORKER_COUNT=524288"), 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  link(false, 0, 0, true);
  expectAllOk(j, 2);
  EXPECT_GE(sumField(j.text(), "failovers"), 2u) << j.text();
}

// Down, up (fail-back after hold-down), repeatedly, on both rails.
TEST_F(Failover, DownThenUpRepeatedFailsBack) {
  Job j(testbed().name(), env("WORKER_SECONDS=9 WORKER_COUNT=262144"), 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
  for (int k = 0; k < 4; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    link(false, k % 2, k % 2, true);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    link(true, k % 2, k % 2, true);
    std::this_thread::sleep_for(std::chrono::milliseconds(900));  // > hold-down: fail-back
  }
  expectAllOk(j, 2);
  std::string t = j.text();
  EXPECT_GE(countMatches(t, "fail-back of rank"), 2) << t;
  EXPECT_GE(countMatches(t, "failover of rank"), 4) << t;
  EXPECT_GE(sumField(t, "failbacks"), 2u) << t;
}

// A flap storm: the switch port toggles every 30 ms for a second; results stay exact.
TEST_F(Failover, FlapStorm) {
  Job j(testbed().name(), env("WORKER_ITERS=200 WORKER_COUNT=262144"), 120);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int k = 0; k < 30; ++k) {
    link(k % 2 == 1, 0, 0, true);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  link(true, 0, 0, true);
  expectAllOk(j, 2);
}

// Every rail of host 0 down: no path is left; every rank errors within the failover timeout
// (plus the stall time the far end needs to notice), nobody hangs.
TEST_F(Failover, AllRailsOfAHostDownErrorsEveryRankInTime) {
  Job j(testbed().name(),
        "RECCL_TIMEOUT_MS=60000 RECCL_STALL_TIMEOUT_MS=500 RECCL_FAILOVER_TIMEOUT_MS=3000 WORKER_SECONDS=60 "
        "WORKER_COUNT=262144",
        60);
  ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto t0 = Clock::now();
  link(false, 0, 0, true);
  link(false, 0, 1, true);
  int code = j.wait();
  std::string t = j.text();
  EXPECT_NE(code, 0) << t;
  auto errs = j.firstPerRank("worker rank ([0-9]+) iteration [0-9]+: (network error|remote process|timeout)");
  EXPECT_EQ(errs.size(), 2u) << t;
  for (auto& [r, at] : errs) {
    double s = std::chrono::duration<double>(at - t0).count();
    EXPECT_LT(s, 3.0 + 2.0) << "rank " << r << " errored after " << s << " s\n" << t;
  }
}

}  // namespace
