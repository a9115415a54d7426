// bench/failover/fault_bench.sh end to end at small sizes on a real 2-host testbed with real
// link-downs: the rounds run, the one-rail runs around them are paired, nothing wrong, and the
// testbed gone afterwards; with --pause-damon the kernel's DAMON monitors that ran are off for the
// run and on again after it; with --trace-bursts (where bpftrace is installed) every fault run has
// its trace of kernel threads' bursts and tracefs is left as it was. On tap NICs with short carrier
// drops (TUNSETCARRIER) per source: the plan drops the carrier for 50-300 ms while a neighbour
// NIC's carrier flaps (--linkwatch-busy), which is not counted as a fault, each fault's
// moment is the carrier syscall's return, every fault is either followed by a failover or counted
// missed, and Gloo meets the same carrier drop. Needs root; skipped otherwise. The report itself:
// fault_report_test.
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

// Runs fault_bench.sh with `args` (its --out is DIR/fb.json): its output in `out`, its JSON in `j`;
// it must succeed with every result exact.
void runBench(const std::vector<std::string>& args, const fs::path& dir, std::string& out, json& j) {
  int rc;
  {
    Child c(args, {}, dir / "out.txt");
    rc = c.wait(std::chrono::seconds(400));
  }
  out = slurp(dir / "out.txt");
  ASSERT_EQ(rc, 0) << out;
  j = json::parse(slurp(dir / "fb.json"));
  EXPECT_EQ(j["wrong_or_failed"], 0);
}

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
  std::string out;
  json j;
  ASSERT_NO_FATAL_FAILURE(runBench(args, dir, out, j));
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

TEST(FaultBenchScript, ShortCarrierDropsOnTapNicsPerSource) {
  if (geteuid() != 0) GTEST_SKIP() << "the testbed needs root";
  if (!fs::exists(fs::path(RECCL_BIN_DIR) / "reccl-bench")) GTEST_SKIP() << "reccl-bench is not built";
  if (!fs::exists("/dev/net/tun")) GTEST_SKIP() << "no /dev/net/tun: tap NICs cannot be made here";
  const fs::path dir = fs::temp_directory_path() / ("reccl-fault-bench-tap-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path build = fs::path(RECCL_BIN_DIR).parent_path();
  const bool gloo = fs::exists(fs::path(RECCL_BIN_DIR) / "gloo_bench");
  // rtnetlink (no BPF needed) and in-band only: the two sources that see a short drop late or
  // not at all on a tap, so "missed" is exercised where it happens.
  std::vector<std::string> args = {"/bin/bash", FAULT_BENCH, "--build", build.string(), "--nic", "tap",
                                   "--fault", "carrier", "--down-ms", "50-300", "--faults", "2", "--rounds", "1",
                                   "--size", "1M", "--sources", "netlink none", "--baseline-iters", "5",
                                   "--linkwatch-busy", "300", "--gloo-timeout-ms", "3000",
                                   "--out", (dir / "fb.json").string()};
  if (!gloo) args.push_back("--no-gloo");
  std::string out;
  json j;
  ASSERT_NO_FATAL_FAILURE(runBench(args, dir, out, j));
  EXPECT_EQ(j["testbed"]["nic"], "tap");
  EXPECT_EQ(j["testbed"]["wire_sched"], "normal") << "the testbed's default for the taps' forwarder";
  EXPECT_EQ(j["fault"], "carrier");
  for (const char* src : {"netlink", "none"}) {
    const json& s = j["sources"][src];
    ASSERT_TRUE(s.contains("missed")) << src << ": " << s.dump();
    EXPECT_EQ(s["faults"], 2) << src;
    // The report pools every round's faults: its missed count is the faults of the raw runs that
    // no failover followed.
    int missedInRuns = 0;
    for (const auto& [key, r] : j["runs"].items())
      if (key.rfind(std::string("fault_") + src + "_r", 0) == 0)
        for (const auto& f : r["faults"]) missedInRuns += f["stall_ms"].is_null() ? 1 : 0;
    EXPECT_EQ(s["missed"]["faults"].get<int>(), missedInRuns) << src;
    EXPECT_EQ(s["wrong_elements"], 0) << src;
    const json& run = j["runs"][std::string("fault_") + src + "_r0"];
    // The plan: the neighbour's carrier flapping every 300 ms from the start (action 0), and the
    // carrier drops of host 0's NIC (actions 1 and 2; in-band only alternates the rails), 50-300 ms.
    std::vector<json> downs;
    size_t neighbourOff = 0;
    for (const auto& r : run["plan"]["records"]) {
      if (r["source"] == 0) {
        neighbourOff += r["action"] == "carrier-off" ? 1 : 0;
        continue;
      }
      EXPECT_TRUE(r["action"] == "carrier-off") << r.dump();
      if (!r["undo"].get<bool>()) downs.push_back(r);
    }
    ASSERT_EQ(downs.size(), 2u) << run["plan"].dump();
    EXPECT_GE(neighbourOff, 20u) << "the neighbour flaps through the run (3 s + 2 faults + 1.5 s, every 300 ms)";
    for (const auto& r : run["plan"]["records"]) {
      if (!r["undo"].get<bool>() || r["source"] == 0) continue;
      int64_t held = 0;
      for (const auto& d : downs)
        if (d["source"] == r["source"]) held = r["at_ms"].get<int64_t>() - d["at_ms"].get<int64_t>();
      EXPECT_GE(held, 50) << r.dump();
      EXPECT_LE(held, 300) << r.dump();
    }
    // A carrier fault through the plan's held queue counts from its syscall's start (the carrier
    // changes inside it).
    const auto& faults = run["faults"];
    ASSERT_EQ(faults.size(), 2u) << "the neighbour's events are not faults: " << faults.dump();
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(downs[i]["effect_mono_ns"], downs[i]["start_mono_ns"]) << downs[i].dump();
      const double atNs = double(downs[i]["effect_mono_ns"].get<int64_t>() - run["t0_mono_ns"].get<int64_t>());
      EXPECT_NEAR(faults[i]["at_s"].get<double>() * 1e9, atNs, 1000.0) << faults[i].dump();
      EXPECT_NE(faults[i]["target"].get<std::string>().find("-h0/rail"), std::string::npos) << faults[i].dump();
    }
  }
  EXPECT_NE(out.find("(tap)"), std::string::npos) << out;
  EXPECT_NE(out.find("netlink  missed"), std::string::npos) << out;
  if (gloo) {
    // Gloo's loop around a recovered drop (sized from a timed loop to outlast the fault at ~2 s):
    // completed, or failed (its 3 s I/O timeout on a loaded machine); the report names which,
    // that is Gloo's result, not the tooling's.
    const std::string rec = j["gloo"]["recovered_fault"];
    EXPECT_TRUE(rec.rfind("completed", 0) == 0 || rec.rfind("failed (exit", 0) == 0) << j["gloo"].dump();
    EXPECT_EQ(j["gloo"]["held_fault"].get<std::string>().rfind("error after", 0), 0u)
        << "Gloo gives up on a carrier held off (its I/O timeout): " << j["gloo"].dump();
  }
  std::string name = j["testbed"]["name"];
  EXPECT_FALSE(fs::exists("/run/netns/" + name + "-h0")) << "fault_bench.sh leaves no testbed behind";
  fs::remove_all(dir);
}

}  // namespace
