// bench/failover/fault_bench.sh and its report (fault_report.py): the report on made-up runs (each
// round's degraded bandwidth paired with the one-rail runs around it, every round's faults pooled,
// a missing round a failure), and the script end to end at small sizes on a real 2-host testbed
// with real link-downs (needs root; skipped otherwise).
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
    json sum = {{"faults", stalls.size()}, {"faults_with_failover", withFailover},
                {"busbw_gbps", {{"before", 1.0}, {"during", 0.5}, {"degraded", degraded}, {"after", 1.0}}}};
    json counters = {{"failovers", withFailover * 2}, {"failbacks", withFailover * 2}, {"bytes_resent", 100},
                     {"duplicate_steps", 0}, {"summed_over_ranks", true}};
    return {{"faults", fs}, {"summary", sum}, {"counters", counters}, {"out_of_bounds", 0}, {"status", "ok"}};
  }

  void meta(int rounds, int nfaults) {
    write("meta", {{"sources", {"bpf"}}, {"faults", nfaults}, {"rounds", rounds}, {"size", "1M"}, {"down_ms", 400},
                   {"period_ms", 1100}, {"gloo", false}, {"gloo_timeout_ms", 3000}, {"gloo_iters", 1500},
                   {"name", "t"}, {"fifo", 0}, {"settings", "RECCL_STALL_TIMEOUT_MS=200"}});
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
  meta(2, 5);
  write("base_one", plain(1.2));
  write("base_two", plain(1.0));
  // One-rail fault-loop medians by run: 1.0 before round 0, 0.8 between, 0.6 after round 1.
  write("base_loop_one_r0", loop({0.9, 1.0, 1.1}));
  write("base_loop_one_r1", loop({0.8, 0.7, 0.9}));
  write("base_loop_one_r2", loop({0.6, 0.6, 0.5}));
  write("fault_bpf_r0", faults({1.0, 2.0, 9.0}, 0.9));  // 0.9 / mean(1.0, 0.8) = 1.0
  write("fault_bpf_r1", faults({3.0, nullptr}, 0.63));  // 0.63 / mean(0.8, 0.6) = 0.9
  json r;
  std::string text;
  ASSERT_EQ(run(r, text), 0) << text;
  const json& s = r["sources"]["bpf"];
  ASSERT_EQ(s["rounds"].size(), 2u);
  EXPECT_NEAR(s["rounds"][0]["one_rail_fault_loop_gbps"].get<double>(), 0.9, 1e-9);
  EXPECT_NEAR(s["rounds"][0]["ratio"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(s["rounds"][1]["ratio"].get<double>(), 0.9, 1e-9);
  // The median of the two rounds' ratios, not degraded over a baseline taken once.
  EXPECT_NEAR(r["ratios"]["degraded_over_one_rail_paired_bpf"].get<double>(), 0.95, 1e-9);
  // Pooled degraded: the median over the 5 faults' window figures (0.9 x3, 0.63 x2), over the plain one-rail run.
  EXPECT_NEAR(r["ratios"]["degraded_over_one_rail_bpf"].get<double>(), 0.9 / 1.2, 1e-9);
  // Every baseline call pooled: median of the 9 calls is 0.8.
  EXPECT_NEAR(r["baseline_busbw_gbps"]["one_rail_fault_loop"].get<double>(), 0.8, 1e-9);
  // Every round's faults pooled: 5 faults, 4 with a failover, stalls {1, 2, 3, 9}.
  EXPECT_EQ(s["faults"], 5);
  EXPECT_EQ(s["faults_with_failover"], 4);
  EXPECT_EQ(s["stall_ms"]["n"], 4);
  EXPECT_EQ(s["stall_ms"]["p50"], 2.0);
  EXPECT_EQ(s["stall_ms"]["max"], 9.0);
  EXPECT_EQ(s["counters"]["failovers"], 8);
  EXPECT_EQ(s["status"], "ok");
  EXPECT_EQ(r["wrong_or_failed"], 0);
  EXPECT_NE(text.find("per round (bpf): 1.000 0.900"), std::string::npos) << text;
}

TEST_F(FaultReport, ARoundWithoutAResultIsAFailure) {
  meta(2, 4);
  write("base_one", plain(1.0));
  write("base_two", plain(1.0));
  for (int k = 0; k < 3; ++k) write("base_loop_one_r" + std::to_string(k), loop({1.0}));
  write("fault_bpf_r0", faults({1.0, 2.0}, 1.0));  // round 1's run left nothing
  json r;
  std::string text;
  EXPECT_EQ(run(r, text), 1) << text;
  EXPECT_EQ(r["wrong_or_failed"], 1);
  EXPECT_NE(r["sources"]["bpf"]["error"].get<std::string>().find("1 of 2 rounds"), std::string::npos);
  EXPECT_FALSE(r["ratios"].contains("degraded_over_one_rail_paired_bpf"));
}

TEST(FaultBenchScript, RunsTheRoundsWithRealFaultsAndPairsTheBaselines) {
  if (geteuid() != 0) GTEST_SKIP() << "the testbed needs root";
  const fs::path dir = fs::temp_directory_path() / ("reccl-fault-bench-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  if (!fs::exists(fs::path(RECCL_BIN_DIR) / "reccl-bench")) GTEST_SKIP() << "reccl-bench is not built";
  const fs::path build = fs::path(RECCL_BIN_DIR).parent_path();
  // RECCL_DETECTOR=netlink: rtnetlink needs no BPF, so this runs wherever the testbed does.
  std::vector<std::string> args = {"/bin/bash", FAULT_BENCH, "--build", build.string(), "--faults", "3",
                                   "--rounds", "2", "--size", "1M", "--sources", "netlink", "--no-gloo",
                                   "--down-ms", "400", "--period-ms", "1100", "--baseline-iters", "5",
                                   "--out", (dir / "fb.json").string()};
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
  std::string name = j["testbed"]["name"];
  EXPECT_FALSE(fs::exists("/run/netns/" + name + "-h0")) << "fault_bench.sh leaves no testbed behind";
  fs::remove_all(dir);
}

}  // namespace
