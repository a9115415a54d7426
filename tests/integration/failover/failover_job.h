// Shared by the failover testbed tests: a `reccl testbed run` of the failover worker read line by
// line, output helpers, the fixture (2 hosts x N rails) and the gray-rail scenario. The seeded
// fault soak is soak_runner.h.
#pragma once

#include <gtest/gtest.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "testbed_fixture.h"

namespace reccl::test::failover {

using Clock = std::chrono::steady_clock;

// One `reccl testbed run` of the failover worker, read line by line on a thread.
// A timed run (WORKER_SECONDS) lasts at least that long and until wait() (the worker's
// WORKER_STOP_FILE): on a loaded machine the test's waits and faults may take longer than the
// seconds it asked for, and a run that ended first would make its faults miss.
class Job {
 public:
  // rankEnv: more environment for single ranks (rank number -> "NAME=value ..."), on top of `env`;
  // e.g. a detector threshold on one end only, so that which end declares a fault is not a race.
  Job(const std::string& name, const std::string& env, int timeoutSec, int ranksPerHost = 1,
      const std::map<int, std::string>& rankEnv = {}) {
    static int runs = 0;
    if (runs == 0) reapStaleStopFiles();
    stopFile_ = std::string(kStopDir) + kStopPrefix + std::to_string(getpid()) + "-" + std::to_string(runs++) + ".stop";
    unlink(stopFile_.c_str());
    std::string cmd = std::string(RECCL_CLI_PATH) + " testbed run --name " + name + " --ranks-per-host " +
                      std::to_string(ranksPerHost) + " --timeout " + std::to_string(timeoutSec) +
                      " -- /usr/bin/env WORKER_STOP_FILE=" + stopFile_ + " " + env + " " + perRank(rankEnv) +
                      RECCL_FAILOVER_WORKER_PATH + " 2>&1";
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
      std::lock_guard lk(mu_);
      eof_ = true;
      cv_.notify_all();
    });
  }
  ~Job() {
    wait();
    unlink(stopFile_.c_str());
  }
  // Waits until `n` lines contain `what` (or the deadline, or the end of the output).
  bool waitFor(const std::string& what, int n, std::chrono::seconds limit) {
    std::unique_lock lk(mu_);
    bool ok = false;
    cv_.wait_for(lk, limit, [&] {
      int k = 0;
      for (auto& [t, l] : lines_) k += l.find(what) != std::string::npos;
      ok = k >= n;
      return ok || eof_;
    });
    return ok;
  }
  // Waits until `re` (a regex) matches `n` times in the output (or the deadline, or the end of
  // the output).
  bool waitForMatch(const std::string& re, int n, std::chrono::seconds limit) {
    std::regex r(re);
    std::unique_lock lk(mu_);
    bool ok = false;
    cv_.wait_for(lk, limit, [&] {
      ok = std::distance(std::sregex_iterator(text_.begin(), text_.end(), r), std::sregex_iterator()) >= n;
      return ok || eof_;
    });
    return ok;
  }
  bool finished() {
    std::lock_guard lk(mu_);
    return eof_;
  }
  // Lets a timed run end once its WORKER_SECONDS are over (the worker's WORKER_STOP_FILE).
  void requestStop() {
    if (int fd = open(stopFile_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600); fd >= 0) close(fd);
  }
  // requestStop() and waits for the run's exit code.
  int wait() {
    requestStop();
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
  // The lines that came since `*cursor` (a count of lines, 0 at first), with the time each was
  // read; advances the cursor. For callers that follow a long run line by line.
  std::vector<std::pair<Clock::time_point, std::string>> linesFrom(size_t* cursor) {
    std::lock_guard lk(mu_);
    std::vector<std::pair<Clock::time_point, std::string>> out(lines_.begin() + static_cast<long>(*cursor),
                                                               lines_.end());
    *cursor = lines_.size();
    return out;
  }
  // The worker processes this job started (their environment names its stop file), by rank.
  std::map<int, pid_t> workerRanks() const {
    std::map<int, pid_t> out;
    const std::string mine = "WORKER_STOP_FILE=" + stopFile_;
    DIR* d = opendir("/proc");
    if (!d) return out;
    while (dirent* e = readdir(d)) {
      pid_t pid = static_cast<pid_t>(atoi(e->d_name));
      if (pid <= 0 || pid == getpid()) continue;
      std::ifstream in(std::string("/proc/") + e->d_name + "/environ", std::ios::binary);
      std::string var;
      bool found = false;
      int rank = -1;
      while (std::getline(in, var, '\0')) {
        found = found || var == mine;
        if (var.rfind("RANK=", 0) == 0) rank = atoi(var.c_str() + 5);
      }
      std::ifstream exe(std::string("/proc/") + e->d_name + "/comm");
      std::string comm;
      // The worker itself, not the /usr/bin/env or shell in front of it (their comm differs).
      if (found && std::getline(exe, comm) && comm.rfind("failover_work", 0) == 0) out[rank] = pid;
    }
    closedir(d);
    return out;
  }
  std::vector<pid_t> workerPids() const {
    std::vector<pid_t> out;
    for (auto& [rank, pid] : workerRanks()) out.push_back(pid);
    return out;
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
  // A shell that picks the rank's own environment by its RANK (set by `reccl testbed run`) and
  // execs the worker, given as $0; empty when no rank has any. Values must not hold a single quote.
  static std::string perRank(const std::map<int, std::string>& rankEnv) {
    if (rankEnv.empty()) return "";
    std::string script = "case $RANK in";
    for (auto& [rank, vars] : rankEnv) {
      EXPECT_EQ(vars.find('\''), std::string::npos) << "rank " << rank << " environment: " << vars;
      script += " " + std::to_string(rank) + ") exec /usr/bin/env " + vars + " \"$0\";;";
    }
    return "/bin/sh -c '" + script + " esac; exec \"$0\"' ";
  }
  static constexpr const char* kStopDir = "/tmp/";
  static constexpr const char* kStopPrefix = "reccl-failover-job-";
  // Stop files of test processes that were killed between wait() and the destructor.
  static void reapStaleStopFiles() {
    DIR* d = opendir(kStopDir);
    if (!d) return;
    const std::string prefix = kStopPrefix;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind(prefix, 0) != 0) continue;
      int pid = atoi(n.c_str() + prefix.size());
      if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) unlink((kStopDir + n).c_str());
    }
    closedir(d);
  }
  std::string stopFile_;
  FILE* pipe_ = nullptr;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<Clock::time_point, std::string>> lines_;
  std::string text_;
  bool eof_ = false;
  int code_ = -1;
};

inline uint64_t sumField(const std::string& text, const std::string& field) {
  std::regex r(field + " ([0-9]+)");
  uint64_t s = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), r); it != std::sregex_iterator(); ++it)
    s += std::stoull((*it)[1]);
  return s;
}

// Loss at `rate` on the cable of NIC `dev` of the host in `hostNs`, both directions (`reccl inject
// drop --side switch`), or its removal; the CLI's exit code.
inline int dropOnRail(const std::string& hostNs, const std::string& dev, bool on, const char* rate) {
  std::string where = " --netns " + hostNs + " --dev " + dev;
  std::string cmd = std::string(RECCL_CLI_PATH) + (on ? " inject drop" + where + " --side switch --rate " + rate
                                                      : " inject clear" + where);
  return system(cmd.c_str());
}
inline int dropOnRail0(const std::string& hostNs, bool on, const char* rate) { return dropOnRail(hostNs, "rail0", on, rate); }
inline int onePercentDropOnRail0(const std::string& hostNs, bool on) { return dropOnRail0(hostNs, on, "0.01"); }

inline int countMatches(const std::string& text, const std::string& re) {
  std::regex r(re);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), r), std::sregex_iterator()));
}

// Waits until `n` failovers (not fail-backs) have committed over all ranks: each commit prints one
// "failover of" or "failover by peer of" line and counts one in the "failovers" field of "done".
// A timed run checks its counts only after this, so that a slow machine cannot end it first.
inline bool waitFailovers(Job& j, int n, std::chrono::seconds limit = std::chrono::seconds(30)) {
  return j.waitForMatch("failover (of|by peer of) rank", n, limit);
}

// Hosts hosts (2 unless told) x Rails rails, one testbed per suite (see testbed_fixture.h: removed
// even when the test process is killed).
template <int Rails, int Hosts = 2>
class FailoverTest : public TestbedTest<Hosts, Rails> {
 protected:
  using Base = TestbedTest<Hosts, Rails>;
  void TearDown() override {
    if (!Base::skipReason_.empty() || !Base::tb_) return;
    // Every rail back up for the next test, and time for the carrier to settle.
    for (int h = 0; h < Hosts; ++h)
      for (int r = 0; r < Rails; ++r) {
        link(true, h, r, true);
        link(true, h, r, false);
      }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  static std::string portNetns(int host, bool switchSide) {
    return switchSide ? Base::fabricNetns() : Base::netns(host);
  }
  static std::string portDev(int host, int rail, bool switchSide) {
    return switchSide ? "h" + std::to_string(host) + "r" + std::to_string(rail) : "rail" + std::to_string(rail);
  }
  // switchSide: the switch port h<h>r<r> in the fabric; else the host's own NIC rail<r>.
  static void link(bool up, int host, int rail, bool switchSide) {
    std::string cmd = "ip -n " + portNetns(host, switchSide) + " link set " + portDev(host, rail, switchSide) +
                      (up ? " up" : " down");
    int rc = system(cmd.c_str());
    ASSERT_EQ(rc, 0) << cmd;
  }
  // FAILOVER_TEST_ENV (e.g. "RECCL_DEBUG=INFO") is appended to every run's environment.
  static std::string env(const std::string& extra) {
    const char* more = getenv("FAILOVER_TEST_ENV");
    return "RECCL_TIMEOUT_MS=30000 RECCL_STALL_TIMEOUT_MS=1000 RECCL_HOLDDOWN_MS=300 " + extra + " " +
           (more ? more : "");
  }
  static void expectAllOk(Job& j, int ranks) {
    int code = j.wait();
    std::string t = j.text();
    if (getenv("FAILOVER_TEST_VERBOSE")) printf("%s", t.c_str());
    EXPECT_EQ(code, 0) << t;
    EXPECT_EQ(countMatches(t, "done rank [0-9]+"), ranks) << t;
  }

  // The gray rail with no healthy rail left: host 0's rail 1 is pulled at the switch (rank 0 moves
  // its connections to rail 0), then rail 0 drops 1 % of what crosses host 0's cable until rank 0's
  // in-process BPF detector marks it DEGRADED and the connections stay on it (nothing healthy is
  // left); then the drop goes and rail 1 comes back at rank 0. Both ends retransmit, and the first
  // DEGRADED wins (the other end holds its own, explained by the peer's report): rank 1's
  // retransmit threshold is out of reach, so rank 0 is the end that declares it every time.
  // `*job` is left running for the caller to check what the rail's return does, and to end.
  void grayRail0ThenRail1Back(std::unique_ptr<Job>* job) {
    static_assert(Rails == 2, "rail 1 out and rail 0 gray must leave no healthy rail");
    *job = std::make_unique<Job>(Base::testbed().name(),
                                 env("RECCL_DETECTOR=bpf RECCL_DEBUG=INFO RECCL_DEBUG_SUBSYS=FAILOVER "
                                     "RECCL_DEGRADED_CLEAR_MS=60000 RECCL_FAILOVER_TIMEOUT_MS=3000 WORKER_SECONDS=14"),
                                 120, 1, std::map<int, std::string>{{1, "RECCL_RETRANS_THRESHOLD=1000000"}});
    Job& j = **job;
    ASSERT_TRUE(j.waitFor("started rank", 2, std::chrono::seconds(30))) << j.text();
    // The retransmit hook is BPF: wait until both ranks' detectors run.
    ASSERT_TRUE(j.waitFor("fault source: in-process detector", 2, std::chrono::seconds(20))) << j.text();
    link(false, 0, 1, true);
    ASSERT_TRUE(j.waitForMatch("rank 0: failover (by peer )?of .* -> rail 0 \\(rail0\\) epoch [0-9]+: reason link-down",
                               1, std::chrono::seconds(30)))
        << j.text();
    // Both directions: only what the host sends (`--side host --egress`) was not declared DEGRADED
    // within 8 s here.
    ASSERT_EQ(onePercentDropOnRail0(Base::netns(0), true), 0);
    // No assertion until the drop is gone: the testbed serves the suite's next tests.
    bool gray = j.waitForMatch("rank 0: rail 0 \\(rail0\\) degraded \\(source detector", 1, std::chrono::seconds(30));
    bool stayed = gray && j.waitForMatch("rank [01]: rank [01]->[01] ch [0-9]+: rail 0 degraded and no healthy rail to "
                                         "move to",
                                         1, std::chrono::seconds(10));
    int clear = onePercentDropOnRail0(Base::netns(0), false);
    link(true, 0, 1, true);
    EXPECT_EQ(clear, 0);
    ASSERT_TRUE(gray) << j.text();
    ASSERT_TRUE(stayed) << j.text();
    // Rank 1's threshold took: it never declared rail 0 itself.
    ASSERT_EQ(countMatches(j.text(), "rank 1: rail 0 \\(rail0\\) degraded \\(source"), 0) << j.text();
  }
};

}  // namespace reccl::test::failover
