// bench/failover/fault_report.py, the report of fault_bench.sh, on made-up runs: each round's
// degraded bandwidth paired with the one-rail runs around it, every round's faults pooled, a missing
// round or an empty one-rail run a failure. Needs python3 only.
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

class FaultReport : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 is not installed";
    dir_ = fs::temp_directory_path() / ("reccl-fault-report-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& tag, const json& j) { std::ofstream(dir_ / (tag + ".json")) << j.dump(); }

  // A plain reccl-bench run with this out-of-place busbw.
  static json plain(double busbw) { return {{"rows", {{{"out_of_place", {{"busbw_gbps", busbw}}}}}}, {"out_of_bounds", 0}}; }

  // A fault-loop run without faults: these per-call busbw figures.
  static json loop(const std::vector<double>& busbw) {
    json its = json::array();
    for (double b : busbw) its.push_back({{"busbw_gbps", b}});
    return {{"iterations", its}, {"out_of_bounds", 0}, {"status", "ok"}};
  }

  // One round's fault run: these per-fault stalls (ms; null: no failover), summary degraded busbw.
  static json faults(const std::vector<json>& stalls, double degraded) {
    json fs = json::array();
    int withFailover = 0;
    for (const auto& s : stalls) {
      withFailover += s.is_null() ? 0 : 1;
      fs.push_back({{"stall_ms", s}, {"in_collective", true}, {"signal_after_fault_ms", 0.1},
                    {"fault_to_switch_ms", 2.0}, {"first_step_ms", s}, {"resume_after_switch_ms", 1.0},
                    {"busbw_before_gbps", 1.0}, {"busbw_during_gbps", 0.5}, {"busbw_degraded_gbps", degraded},
                    {"busbw_after_gbps", 1.0}});
    }
    // The run's own summary (the median over all calls) differs from its faults' window medians:
    // the report pairs and pools the per-fault figures, so a report reading this one is caught.
    json sum = {{"faults", stalls.size()}, {"faults_with_failover", withFailover},
                {"busbw_gbps", {{"before", 1.0}, {"during", 0.5}, {"degraded", degraded + 0.05}, {"after", 1.0}}}};
    json counters = {{"failovers", withFailover * 2}, {"failbacks", withFailover * 2}, {"bytes_resent", 100},
                     {"duplicate_steps", 0}, {"summed_over_ranks", true}};
    return {{"faults", fs}, {"summary", sum}, {"counters", counters}, {"out_of_bounds", 0}, {"status", "ok"}};
  }

  // A fault run on CLOCK_MONOTONIC: its t0 and each fault's time after it (s), for the bursts.
  static json timed(json run, int64_t t0Ns, const std::vector<double>& atS) {
    run["t0_mono_ns"] = t0Ns;
    for (size_t i = 0; i < atS.size(); ++i) run["faults"][i]["at_s"] = atS[i];
    return run;
  }

  // The fault-free runs of a bench with `rounds` fault rounds, every one at 1 GB/s but the plain
  // one-rail run (`oneRail`).
  void flatBaselines(int rounds, double oneRail = 1.0) {
    write("base_one", plain(oneRail));
    write("base_two", plain(1.0));
    for (int k = 0; k <= rounds; ++k) write("base_loop_one_r" + std::to_string(k), loop({1.0}));
  }

  void meta(int rounds, int nfaults, json machine = nullptr) {
    json m = {{"sources", {"bpf"}}, {"faults", nfaults}, {"rounds", rounds}, {"size", "1M"}, {"down_ms", 400},
              {"period_ms", 1100}, {"gloo", false}, {"gloo_timeout_ms", 3000}, {"gloo_iters", 1500},
              {"name", "t"}, {"fifo", 0}, {"settings", "RECCL_STALL_TIMEOUT_MS=200"}};
    if (!machine.is_null()) m["machine"] = machine;
    write("meta", m);
  }

  // Runs the report; its exit code, the JSON in `out`, the printed text in `text`.
  int run(json& out, std::string& text) {
    int rc;
    {
      Child c({"/usr/bin/env", "python3", FAULT_REPORT, dir_.string(), (dir_ / "out.json").string()}, {},
              dir_ / "out.txt");
      rc = c.wait(std::chrono::seconds(60));
    }
    text = slurp(dir_ / "out.txt");
    if (fs::exists(dir_ / "out.json")) out = json::parse(slurp(dir_ / "out.json"));
    return rc;
  }

  fs::path dir_;
};

TEST_F(FaultReport, PairsEachRoundWithTheOneRailRunsAroundIt) {
  meta(3, 6);
  write("base_one", plain(1.2));
  write("base_two", plain(1.0));
  // One-rail fault-loop medians by run: 1.0 before round 0, 0.8 and 0.6 between, 0.6 after round 2.
  write("base_loop_one_r0", loop({0.9, 1.0, 1.1}));
  write("base_loop_one_r1", loop({0.8, 0.7, 0.9}));
  write("base_loop_one_r2", loop({0.6, 0.6, 0.5}));
  write("base_loop_one_r3", loop({0.6, 0.5, 0.7}));
  write("fault_bpf_r0", faults({1.0, 2.0, 9.0}, 0.9));  // 0.9 / mean(1.0, 0.8) = 1.0
  write("fault_bpf_r1", faults({3.0, nullptr}, 0.63));  // 0.63 / mean(0.8, 0.6) = 0.9
  write("fault_bpf_r2", faults({4.0}, 0.48));           // 0.48 / mean(0.6, 0.6) = 0.8
  json r;
  std::string text;
  ASSERT_EQ(run(r, text), 0) << text;
  const json& s = r["sources"]["bpf"];
  ASSERT_EQ(s["rounds"].size(), 3u);
  EXPECT_NEAR(s["rounds"][0]["one_rail_fault_loop_gbps"].get<double>(), 0.9, 1e-9);
  EXPECT_NEAR(s["rounds"][0]["ratio"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(s["rounds"][1]["ratio"].get<double>(), 0.9, 1e-9);
  EXPECT_NEAR(s["rounds"][2]["ratio"].get<double>(), 0.8, 1e-9);
  EXPECT_EQ(s["rounds_paired"], 3);
  // The middle round's ratio, not degraded over a baseline taken once.
  EXPECT_NEAR(r["ratios"]["degraded_over_one_rail_paired_bpf"].get<double>(), 0.9, 1e-9);
  // Pooled degraded: the median over the 6 faults' window figures (0.9 x3, 0.63 x2, 0.48) is 0.63
  // (nearest rank); over the plain one-rail run and over all 12 one-rail calls (median 0.7).
  EXPECT_NEAR(s["busbw_gbps"]["degraded"].get<double>(), 0.63, 1e-9);
  EXPECT_NEAR(r["ratios"]["degraded_over_one_rail_bpf"].get<double>(), 0.63 / 1.2, 1e-9);
  EXPECT_NEAR(r["baseline_busbw_gbps"]["one_rail_fault_loop"].get<double>(), 0.7, 1e-9);
  EXPECT_NEAR(r["ratios"]["degraded_over_one_rail_fault_loop_bpf"].get<double>(), 0.9, 1e-9);
  // Every round's faults pooled: 6 faults, 5 with a failover, stalls {1, 2, 3, 4, 9}.
  EXPECT_EQ(s["faults"], 6);
  EXPECT_EQ(s["faults_with_failover"], 5);
  EXPECT_EQ(s["stall_ms"]["n"], 5);
  EXPECT_EQ(s["stall_ms"]["p50"], 3.0);
  EXPECT_EQ(s["stall_ms"]["max"], 9.0);
  EXPECT_EQ(s["counters"]["failovers"], 10);
  EXPECT_EQ(s["status"], "ok");
  EXPECT_EQ(r["wrong_or_failed"], 0);
  EXPECT_NE(text.find("per round (bpf): 1.000 0.900 0.800 (3 of 3 rounds paired)"), std::string::npos) << text;
}

// A fault no failover followed (a short carrier drop on a tap) is counted missed per source, with
// what it cost the call it hit: 1 MiB at busbw_factor 1, 0.5 GB/s during against 1.0 before is
// 2.097 ms against 1.049 ms, 1.049 ms longer. The fault kind and NIC reach the table.
TEST_F(FaultReport, MissedFaultsAndWhatTheyCostPerSource) {
  json m = {{"sources", {"bpf", "netlink"}}, {"faults", 3}, {"rounds", 1}, {"size", "1M"}, {"down_ms", "50-300"},
            {"period_ms", 2300}, {"gloo", false}, {"gloo_timeout_ms", 3000}, {"gloo_iters", 1500},
            {"name", "t"}, {"fifo", 0}, {"settings", "RECCL_STALL_TIMEOUT_MS=200"}, {"nic", "tap"},
            {"fault", "carrier"}, {"linkwatch_busy_ms", 300}};
  write("meta", m);
  flatBaselines(1, 1.2);
  const json coll = {{"bytes", 1 << 20}, {"busbw_factor", 1.0}};
  json bpf = faults({1.0, 2.0, 3.0}, 0.9);
  bpf["collective"] = coll;
  json netlink = faults({nullptr, 700.0, nullptr}, 0.9);
  netlink["collective"] = coll;
  netlink["faults"][2]["fail_back_pending"] = true;  // the rail it hit had nothing on it
  netlink["out_of_bounds"] = 0;
  write("fault_bpf_r0", bpf);
  write("fault_netlink_r0", netlink);
  json r;
  std::string text;
  ASSERT_EQ(run(r, text), 0) << text;
  EXPECT_EQ(r["testbed"]["nic"], "tap");
  EXPECT_EQ(r["fault"], "carrier");
  EXPECT_EQ(r["sources"]["bpf"]["missed"]["faults"], 0);
  const json& miss = r["sources"]["netlink"]["missed"];
  EXPECT_EQ(miss["faults"], 2);
  EXPECT_EQ(miss["hit_call_extra_ms"]["n"], 2);
  EXPECT_EQ(miss["fail_back_pending"], 1);
  EXPECT_NEAR(miss["hit_call_extra_ms"]["p50"].get<double>(), (1 << 20) / 1e9 / 0.5 * 1e3 - (1 << 20) / 1e9 * 1e3,
              1e-9);
  EXPECT_EQ(r["sources"]["netlink"]["wrong_elements"], 0);
  EXPECT_NEAR(r["ratios"]["stall_p99_netlink_over_bpf"].get<double>(), 700.0 / 3.0, 1e-9);
  EXPECT_NE(text.find("2 hosts x 2 rails (tap)"), std::string::npos) << text;
  EXPECT_NE(text.find("carrier off (TUNSETCARRIER) 50-300 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("netlink  missed 2 of 3 faults (no failover, 1 of them on a rail nothing was on"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("20 ms every 300 ms"), std::string::npos) << text;
}

// A fault between two calls meets the application's own work on the CPUs, not threads waiting on
// the network: the report splits the stall by where the fault fell. A fault no failover followed
// is in neither part, and one whose side is unknown (a run made before the field) in neither.
TEST_F(FaultReport, TheStallIsSplitByWhereTheFaultFell) {
  meta(1, 5);
  flatBaselines(1, 1.2);
  json bpf = faults({1.0, 2.0, 8.0, nullptr, 30.0}, 0.9);
  bpf["faults"][2]["in_collective"] = false;
  bpf["faults"][3]["in_collective"] = false;
  bpf["faults"][4].erase("in_collective");
  write("fault_bpf_r0", bpf);
  json r;
  std::string text;
  ASSERT_EQ(run(r, text), 0) << text;
  const json& s = r["sources"]["bpf"];
  EXPECT_EQ(s["stall_ms"]["n"], 4);
  EXPECT_EQ(s["stall_ms_fault_inside_a_call"]["n"], 2);
  EXPECT_EQ(s["stall_ms_fault_inside_a_call"]["max"], 2.0);
  EXPECT_EQ(s["stall_ms_fault_between_calls"]["n"], 1);
  EXPECT_EQ(s["stall_ms_fault_between_calls"]["max"], 8.0);
  EXPECT_NE(text.find("bpf: stall by where the fault fell, ms p50/p99/max: inside a call 1.00/2.00/2.00 (2 faults), "
                      "between calls 8.00/8.00/8.00 (1 faults)"),
            std::string::npos)
      << text;
}

// A RECCL_* variable the fault runs inherited from the bench's caller (the failover threads at
// FIFO, say) changes the figures: the report names it, and leaves out what the bench set itself.
TEST_F(FaultReport, SettingsInheritedFromTheCallerAreNamed) {
  meta(2, 2);
  flatBaselines(2);
  json env = {{"RANK", "0"}, {"RECCL_DETECTOR", "bpf"}, {"RECCL_NICS", "rail0,rail1"}, {"RECCL_TESTBED", "t"},
              {"RECCL_STALL_TIMEOUT_MS", "200"}, {"RECCL_FAILOVER_RT_PRIO", "20"}};
  json r0 = faults({1.0}, 0.9);
  r0["environment"] = {{"env", env}};
  env["RECCL_FAILOVER_SLICE_US"] = "100";  // a later round's caller set one more
  json r1 = faults({1.0}, 0.9);
  r1["environment"] = {{"env", env}};
  write("fault_bpf_r0", r0);
  write("fault_bpf_r1", r1);
  json r;
  std::string text;
  ASSERT_EQ(run(r, text), 0) << text;
  EXPECT_EQ(r["caller_settings"], json({"RECCL_FAILOVER_RT_PRIO=20", "RECCL_FAILOVER_SLICE_US=100"}));
  EXPECT_EQ(r["ranks_sched"], "normal, failover threads SCHED_FIFO 20");
  EXPECT_NE(text.find("set by the caller for every rank: RECCL_FAILOVER_RT_PRIO=20 RECCL_FAILOVER_SLICE_US=100\n"),
            std::string::npos)
      << text;
}

// Nothing inherited: no line, an empty list.
TEST_F(FaultReport, NoCallerSettingsNoLine) {
  meta(1, 1);
  flatBaselines(1);
  json run0 = faults({1.0}, 0.9);
  run0["environment"] = {{"env", {{"RECCL_DETECTOR", "bpf"}, {"RECCL_STALL_TIMEOUT_MS", "200"}}}};
  write("fault_bpf_r0", run0);
  json r;
  std::string text;
  ASSERT_EQ(run(r, text), 0) << text;
  EXPECT_EQ(r["caller_settings"], json::array());
  EXPECT_EQ(r["ranks_sched"], "normal");
  EXPECT_EQ(text.find("set by the caller"), std::string::npos) << text;
}

// fault_bench.sh's "machine" (DAMON, --trace-waits) reaches the report; runqslower's lines count
// only the reccl threads' waits, per task name the CPU came from (numbered kernel threads folded).
TEST_F(FaultReport, MachineAndTheRecclThreadsWaitsAreReported) {
  meta(1, 1, {{"damon_kdamonds_on", 1}, {"damon_paused", false}, {"kdamond_cpu_ms", 5140}, {"trace_waits_us", 3000}});
  flatBaselines(1);
  write("fault_bpf_r0", faults({1.0}, 1.0));
  std::ofstream(dir_ / "waits.txt") << "# fault_bpf_r0\n"
                                    << "Tracing run queue latency higher than 3000 us\n"
                                    << "TIME     COMM             TID           LAT(us) PREV COMM        PREV TID\n"
                                    << "03:34:38 reccl-monitor    23360            11803 kdamond.0        77\n"
                                    << "03:34:38 reccl-progress   23374            3320 kdamond.0        77\n"
                                    << "03:34:39 reccl-migrator   23375            4100 ksoftirqd/1      23\n"
                                    << "03:34:39 bash             23376            9726 kdamond.0        77\n"
                                    << "03:34:40 reccl-listener   23377            3050 my task x        78\n";
  json r;
  std::string text;
  ASSERT_EQ(run(r, text), 0) << text;
  const json& w = r["machine"]["waits"];
  EXPECT_EQ(r["machine"]["kdamond_cpu_ms"], 5140);
  EXPECT_EQ(w["reccl_waits"], 4) << "bash is not a reccl thread";
  EXPECT_EQ(w["max_us"], 11803);
  EXPECT_EQ(w["p99_us"], 11803) << "nearest rank: the 4th of 4";
  EXPECT_EQ(w["cpu_from"]["my task x"], 1) << "a task name with spaces";
  EXPECT_EQ(w["cpu_from"]["kdamond"], 2);
  EXPECT_EQ(w["cpu_from"]["ksoftirqd"], 1);
  EXPECT_NE(text.find("machine: 1 DAMON kdamond(s) on at the start, not paused"), std::string::npos) << text;
  EXPECT_NE(text.find("(p99 11803 us); the CPU came from: kdamond 2, ksoftirqd 1, my task x 1"), std::string::npos)
      << text;
}

// fault_bench.sh --trace-bursts: kthread_bursts.bt's lines laid over each fault's stall
// [fault, fault + stall], per fault run: a burst counts for a fault only when it overlaps that
// fault's stall in that run's trace.
TEST_F(FaultReport, KernelThreadBurstsAreLaidOverEachFaultsStall) {
  meta(2, 4, {{"damon_kdamonds_on", 1}, {"damon_paused", false}, {"kdamond_cpu_ms", 900}, {"trace_waits_us", 0},
              {"trace_bursts", true}});
  flatBaselines(2);
  // Round 0: t0 = 1 s; faults at +1 s (stall 30 ms) and +2 s (stall 4 ms). Round 1: t0 = 10 s;
  // faults at +1 s (stall 12 ms) and +2 s (stall 5 ms).
  write("fault_bpf_r0", timed(faults({30.0, 4.0}, 1.0), 1000000000LL, {1.0, 2.0}));
  write("fault_bpf_r1", timed(faults({12.0, 5.0}, 1.0), 10000000000LL, {1.0, 2.0}));
  std::ofstream(dir_ / "bursts.txt")
      << "# fault_bpf_r0\n"
      << "Attaching 2 probes...\n"
      << "burst 1 1990000000 2014000000 kdamond.0\n"      // 24 ms, begins before round 0's first fault
      << "burst 0 2020000000 2025000000 kdamond.0\n"      // 5 ms inside it: the longer one is named
      << "burst 0 3010000000 3012000000 rcu_preempt\n"    // after round 0's second fault's stall
      << "burst 1 11005000000 11007000000 kworker/1:2-mm\n"  // round 1's first fault, but in round 0's trace
      << "# fault_bpf_r1\n"
      << "Attaching 2 probes...\n"
      << "burst 0 12004000000 12006000000 ksoftirqd/0\n";  // inside round 1's second fault (5 ms)
  json r;
  std::string text;
  ASSERT_EQ(run(r, text), 0) << text;
  const json& b = r["sources"]["bpf"]["kthread_bursts"];
  EXPECT_EQ(b["faults_over_goal"], 2);
  EXPECT_EQ(b["over_goal_with_a_burst"], 1) << "round 1's slow fault had no burst in its own trace";
  EXPECT_EQ(b["over_goal_by_thread"]["kdamond"], 1);
  EXPECT_EQ(b["faults_within_goal"], 2);
  EXPECT_EQ(b["within_goal_with_a_burst"], 1);
  EXPECT_EQ(b["stall_ms_faults_without_a_burst"]["n"], 2);
  EXPECT_EQ(b["stall_ms_faults_without_a_burst"]["max"], 12.0);
  const json& f0 = r["runs"]["fault_bpf_r0"]["faults"][0];
  EXPECT_NEAR(f0["kthread_burst_ms"].get<double>(), 24.0, 1e-9);
  EXPECT_EQ(f0["kthread_burst_thread"], "kdamond.0");
  // Inside round 0's first stall [2000, 2030] ms: 14 ms of the first burst and the 5 ms one.
  EXPECT_NEAR(f0["kthread_cpu_in_stall_ms"].get<double>(), 19.0, 1e-9);
  EXPECT_NEAR(b["over_goal_kthread_cpu_share_p50"].get<double>(), 19.0 / 30.0, 1e-9);
  EXPECT_EQ(r["runs"]["fault_bpf_r0"]["faults"][1]["kthread_burst_thread"], nullptr);
  EXPECT_EQ(r["runs"]["fault_bpf_r1"]["faults"][1]["kthread_burst_thread"], "ksoftirqd/0");
  const json& m = r["machine"]["kthread_bursts"];
  EXPECT_EQ(m["bursts"], 5);
  EXPECT_NEAR(m["max_ms"].get<double>(), 24.0, 1e-9);
  EXPECT_EQ(m["per_thread"]["kdamond"]["bursts"], 2);
  EXPECT_NEAR(m["per_thread"]["kdamond"]["total_ms"].get<double>(), 29.0, 1e-9);
  EXPECT_EQ(b["faults_untraced"], 0);
  EXPECT_NE(text.find("bpf: of 2 faults over 5 ms, 1 had a kernel thread's burst in their stall (kdamond 1; kernel "
                      "threads' CPU time in such a stall, over the stall, at the median: 63 %); of 2 within it, 1 "
                      "did; stall without those faults p50 4.00 p99 12.00 max 12.00 ms (2 faults)\n"),
            std::string::npos)
      << text;
}

// A fault run whose tracer never started has no header in bursts.txt: its faults are unknown,
// not counted as faults without a burst.
TEST_F(FaultReport, AFaultRunWithoutATraceIsNotCountedAsWithoutBursts) {
  meta(1, 2, {{"damon_kdamonds_on", 0}, {"damon_paused", false}, {"kdamond_cpu_ms", 0}, {"trace_waits_us", 0},
              {"trace_bursts", true}});
  flatBaselines(1);
  write("fault_bpf_r0", timed(faults({30.0, 4.0}, 1.0), 1000000000LL, {1.0, 2.0}));
  std::ofstream(dir_ / "bursts.txt") << "# fault_netlink_r0\nAttaching 2 probes...\n";
  json r;
  std::string text;
  ASSERT_EQ(run(r, text), 0) << text;
  const json& b = r["sources"]["bpf"]["kthread_bursts"];
  EXPECT_EQ(b["faults_untraced"], 2);
  EXPECT_EQ(b["faults_over_goal"], 0);
  EXPECT_EQ(b["stall_ms_faults_without_a_burst"]["n"], 0);
  EXPECT_NE(text.find("; 2 faults in runs without a trace"), std::string::npos) << text;
}

TEST_F(FaultReport, AOneRailRunWithoutACallIsAFailure) {
  meta(1, 1);
  write("base_one", plain(1.0));
  write("base_two", plain(1.0));
  write("base_loop_one_r0", loop({1.0}));
  write("base_loop_one_r1", loop({}));  // ran, but timed no call
  write("fault_bpf_r0", faults({1.0}, 1.0));
  json r;
  std::string text;
  EXPECT_EQ(run(r, text), 1) << text;
  EXPECT_EQ(r["wrong_or_failed"], 1);
  EXPECT_EQ(r["sources"]["bpf"]["rounds_paired"], 0);
  EXPECT_FALSE(r["ratios"].contains("degraded_over_one_rail_paired_bpf"));
}

// Where signal -> committed went: the initiators' failover lines in the fault runs' rank logs,
// split per hop; the passive end's lines, fail-backs and a stamp not reached ("-1") are left out.
TEST_F(FaultReport, TheInitiatorsFailoverTimelinesAreSplitPerHop) {
  meta(1, 3);
  flatBaselines(1);
  write("fault_bpf_r0", faults({1.0, 2.0, 3.0}, 1.0));
  const std::string head = "[rank 0] vm:1:2 1.0 reccl warn FAILOVER: rank 0: ";
  std::ofstream(dir_ / "fault_bpf_r0.log")
      << head << "failover of rank 0->1 ch 0 rail 0 (rail0) -> rail 1 (rail1) epoch 2: reason link-down, source "
         "detector, fault-to-switch 2151 us, resent 0 bytes, timeline us: queue 1753 thread 75 standby 13 request 23 "
         "reply 125 commit 159 (queue: detector 951 monitor wake 798 monitor 3)\n"
      << head << "failover of rank 1->0 ch 0 rail 0 (rail0) -> rail 1 (rail1) epoch 3: reason link-down, source "
         "detector, fault-to-switch 1000 us, resent 0 bytes, timeline us: queue 500 thread 300 connect 100 request 10 "
         "reply -1 commit 90\n"
      << head << "failover of rank 0->1 ch 1 rail 0 (rail0) -> rail 1 (rail1) epoch 2: reason link-down, source "
         "detector, fault-to-switch 1900 us, resent 0 bytes, timeline us: queue 1700 thread -1 standby 12 request 20 "
         "reply 140 commit 150 (queue: detector 900 monitor wake 790 monitor 2), on the monitor thread\n"
      << "[rank 1] vm:1:2 1.0 reccl warn FAILOVER: rank 1: failover by peer of rank 0->1 ch 0 rail 0 (rail0) -> "
         "rail 1 (rail1) epoch 2: reason link-down, source peer, fault-to-switch 0 us, resent 0 bytes, timeline us: "
         "thread 0 request 5 commit 331 (record 4, reply sent 90)\n"
      << head << "fail-back of rank 1->0 ch 0 rail 1 (rail1) -> rail 0 (rail0) epoch 5: reason fail-back, source "
         "detector, fault-to-switch 1772 us, resent 0 bytes, timeline us: queue 74 thread 358 connect 521 request 18 "
         "reply 715 commit 83\n";
  json r;
  std::string text;
  ASSERT_EQ(run(r, text), 0) << text;
  const json& h = r["sources"]["bpf"]["hops_us"];
  EXPECT_EQ(h["connections"], 3);
  EXPECT_EQ(h["on_monitor_thread"], 1);
  EXPECT_EQ(h["detector"]["n"], 2);
  EXPECT_EQ(h["detector"]["p50"], 900);
  // A move made on the monitor thread has no migrator thread's hop.
  EXPECT_EQ(h["thread"]["n"], 2);
  EXPECT_EQ(h["thread"]["p50"], 75);
  EXPECT_EQ(h["thread"]["max"], 300);
  EXPECT_EQ(h["reply"]["n"], 2);
  EXPECT_EQ(h["signal_to_commit"]["p99"], 2151);
  EXPECT_NE(text.find("bpf: signal -> committed per connection moved, us p50/p90/p99 (3 connections, 1 moved on "
                      "the monitor thread): detector 900/951/951, monitor wake 790/798/798"),
            std::string::npos)
      << text;
}

TEST_F(FaultReport, ARoundWithoutAResultIsAFailure) {
  meta(2, 4);
  flatBaselines(2);
  write("fault_bpf_r0", faults({1.0, 2.0}, 1.0));  // round 1's run left nothing
  json r;
  std::string text;
  EXPECT_EQ(run(r, text), 1) << text;
  EXPECT_EQ(r["wrong_or_failed"], 1);
  EXPECT_NE(r["sources"]["bpf"]["error"].get<std::string>().find("1 of 2 rounds"), std::string::npos);
  EXPECT_FALSE(r["ratios"].contains("degraded_over_one_rail_paired_bpf"));
}

}  // namespace
