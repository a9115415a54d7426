// bench/failover/fault_bench.sh end to end at small sizes on a real 2-host testbed with real
// link-downs: the rounds run, the one-rail runs around them are paired, nothing wrong, and the
// testbed gone afterwards; with --pause-damon the kernel's DAMON monitors that ran are off for the
// run and on again after it; with --trace-bursts (where bpftrace is installed) every fault run has
// its trace of kernel threads' bursts and tracefs is left as it was. Needs root; skipped otherwise.
// The report itself: fault_report_test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_child.h"

namespace {

using nlohmann::json;
using reccl::benchtest::Child;
using reccl::benchtest::slurp;
namespace fs = std::filesystem;

// The state files of the kdamonds that are on (DAMON's sysfs interface; none on most machines).
std::vector<fs::path> kdamondsOn() {
  std::vector<fs::path> on;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator("/sys/kernel/mm/damon/admin/kdamonds", ec)) {
    std::ifstream in(d.path() / "state");
    std::string state;
    if (in >> state && state == "on") on.push_back(d.path() / "state");
  }
  return on;
}

// Kernel threads named kdamond.N: one per running kdamond, DAMON modules' (reclaim, lru_sort,
// stat) included, which --pause-damon leaves alone.
size_t kdamondThreads() {
  size_t n = 0;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator("/proc", ec)) {
    std::ifstream in(d.path() / "comm");
    std::string comm;
    if (in >> comm && comm.rfind("kdamond.", 0) == 0) ++n;
  }
  return n;
}

// Turns back on what was on before, whatever the script did or failed to do (killed at the
// deadline, its EXIT trap never ran): a test must not leave the machine's DAMON off.
struct DamonRestore {
  std::vector<fs::path> on;
  ~DamonRestore() {
    for (const auto& st : on) {
      std::ifstream in(st);
      std::string state;
      if (in >> state && state != "on") std::ofstream(st) << "on";
    }
  }
};

TEST(FaultBenchScript, RunsTheRoundsWithRealFaultsAndPairsTheBaselines) {
  if (geteuid() != 0) GTEST_SKIP() << "the testbed needs root";
  if (!fs::exists(fs::path(RECCL_BIN_DIR) / "reccl-bench")) GTEST_SKIP() << "reccl-bench is not built";
  const fs::path dir = fs::temp_directory_path() / ("reccl-fault-bench-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path build = fs::path(RECCL_BIN_DIR).parent_path();
  // RECCL_DETECTOR=netlink: rtnetlink needs no BPF, so this runs wherever the testbed does.
  std::vector<std::string> args = {"/bin/bash", FAULT_BENCH, "--build", build.string(), "--faults", "3",
                                   "--rounds", "2", "--size", "1M", "--sources", "netlink", "--no-gloo",
                                   "--down-ms", "400", "--period-ms", "1100", "--baseline-iters", "5",
                                   "--pause-damon", "--out", (dir / "fb.json").string()};
  // --trace-bursts where bpftrace is (scripts/setup.sh installs it): tracefs mounted for the run
  // when it is not, and left as it was.
  const bool bursts = std::system("command -v bpftrace >/dev/null 2>&1") == 0;
  if (bursts) args.push_back("--trace-bursts");
  const bool tracefsBefore = fs::exists("/sys/kernel/tracing/events/sched");
  const auto damonBefore = kdamondsOn();
  const bool onlyAdminKdamonds = kdamondThreads() == damonBefore.size();
  DamonRestore restore{damonBefore};
  int rc;
  {
    Child c(args, {}, dir / "out.txt");
    rc = c.wait(std::chrono::seconds(400));
  }
  std::string out = slurp(dir / "out.txt");
  ASSERT_EQ(rc, 0) << out;
  auto j = json::parse(slurp(dir / "fb.json"));
  EXPECT_EQ(j["wrong_or_failed"], 0);
  EXPECT_EQ(j["rounds"], 2);
  EXPECT_EQ(j["baseline_busbw_gbps"]["one_rail_fault_loop_per_round"].size(), 3u);
  const json& s = j["sources"]["netlink"];
  EXPECT_EQ(s["faults"], 3) << "2 + 1 faults over the two rounds";
  EXPECT_EQ(s["faults_with_failover"], 3);
  ASSERT_EQ(s["rounds"].size(), 2u);
  for (const auto& row : s["rounds"]) EXPECT_GT(row["ratio"].get<double>(), 0.0) << row.dump();
  EXPECT_GT(j["ratios"]["degraded_over_one_rail_paired_netlink"].get<double>(), 0.0);
  EXPECT_NE(out.find("per round (netlink)"), std::string::npos) << out;
  // The fault runs' rank logs stay beside the JSON (a fault with no failover leaves nothing else).
  for (const char* round : {"fault_netlink_r0.log", "fault_netlink_r1.log"}) {
    const fs::path log = dir / "fb.logs" / round;
    ASSERT_TRUE(fs::exists(log)) << log << "\n" << out;
    EXPECT_NE(slurp(log).find("# stall"), std::string::npos) << log;
  }
  if (bursts) {
    const std::string trace = slurp(dir / "fb.logs" / "bursts.txt");
    for (const char* tag : {"# fault_netlink_r0\nAttaching", "# fault_netlink_r1\nAttaching"})
      EXPECT_NE(trace.find(tag), std::string::npos) << "each fault run traced, from its start:\n" << trace;
    ASSERT_TRUE(s.contains("kthread_bursts")) << s.dump();
    EXPECT_EQ(s["kthread_bursts"]["faults_over_goal"].get<int>() + s["kthread_bursts"]["faults_within_goal"].get<int>(),
              3);
    EXPECT_TRUE(j["machine"].contains("kthread_bursts"));
    EXPECT_EQ(fs::exists("/sys/kernel/tracing/events/sched"), tracefsBefore) << "tracefs left changed";
  }
  // DAMON: counted, paused (no kdamond thread ran, so none took CPU), and back on afterwards.
  EXPECT_EQ(kdamondsOn(), damonBefore) << "fault_bench.sh --pause-damon left DAMON changed";
  ASSERT_TRUE(j.contains("machine")) << j.dump();
  EXPECT_EQ(j["machine"]["damon_kdamonds_on"], damonBefore.size());
  EXPECT_EQ(j["machine"]["damon_paused"], !damonBefore.empty());
  if (!damonBefore.empty() && onlyAdminKdamonds) {
    EXPECT_EQ(j["machine"]["kdamond_cpu_ms"], 0) << "a kdamond ran during the paused run";
  }
  EXPECT_NE(out.find("DAMON kdamond(s) on at the start, " +
                     std::string(damonBefore.empty() ? "not paused" : "paused for the run")),
            std::string::npos)
      << out;
  std::string name = j["testbed"]["name"];
  EXPECT_FALSE(fs::exists("/run/netns/" + name + "-h0")) << "fault_bench.sh leaves no testbed behind";
  fs::remove_all(dir);
}

}  // namespace
