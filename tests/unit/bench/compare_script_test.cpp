// bench/compare.sh end to end at small sizes on a real 2-host testbed: iperf3, Gloo and (once
// libreccl is built) reccl in interleaved rounds, a JSON with every run, per-round ratios and
// their medians, nothing wrong, and the testbed gone afterwards. Needs root; skipped otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_child.h"

namespace {

using reccl::benchtest::Child;
using reccl::benchtest::slurp;
namespace fs = std::filesystem;

bool netnsExists(const std::string& name) { return fs::exists("/run/netns/" + name + "-h0"); }

TEST(CompareScript, RunsEveryStepAndWritesRatios) {
  if (geteuid() != 0) GTEST_SKIP() << "the testbed needs root";
  for (const char* tool : {"iperf3", "jq"})
    if (std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) != 0)
      GTEST_SKIP() << tool << " is not installed";
  const fs::path dir = fs::temp_directory_path() / ("reccl-compare-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string name = "cmpt" + std::to_string(getpid() % 100000);
  const bool full = fs::exists(fs::path(RECCL_BIN_DIR) / "reccl-bench");
  std::vector<std::string> args = {"/bin/bash", COMPARE_SCRIPT, "--build", fs::path(RECCL_BIN_DIR).parent_path().string(),
                                   "--name", name, "--size", "1M", "--iters", "2", "--lat-iters", "20",
                                   "--iperf-seconds", "1", "--rounds", "2", "--out", (dir / "cmp.json").string()};
  if (!full) args.push_back("--peers-only");
  int rc;
  {
    Child c(args, {}, dir / "out.txt");
    rc = c.wait(std::chrono::seconds(400));
  }
  std::string out = slurp(dir / "out.txt");
  EXPECT_FALSE(netnsExists(name)) << "compare.sh leaves no testbed behind";
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(slurp(dir / "cmp.json"));
  EXPECT_EQ(j["wrong"], 0);
  EXPECT_GT(j["iperf3_per_direction_gbps"]["rail0"].get<double>(), 0.0);
  EXPECT_GT(j["iperf3_per_direction_gbps"]["all"].get<double>(), 0.0);
  EXPECT_GT(j["gloo"]["busbw_gbps"].get<double>(), 0.0);
  EXPECT_GT(j["gloo"]["latency_8b_us"].get<double>(), 0.0);
  EXPECT_EQ(j["rounds"], 2);
  ASSERT_EQ(j["per_round"].size(), 2u);
  for (const auto& r : j["per_round"]) {
    EXPECT_GT(r["iperf3_all"].get<double>(), 0.0) << r.dump();
    EXPECT_GT(r["ratios"]["gloo_over_iperf3_rail0"].get<double>(), 0.0) << r.dump();
  }
  // The median of two rounds lies between them.
  const auto& range = j["ratio_ranges"]["gloo_over_iperf3_rail0"];
  EXPECT_LE(range["min"].get<double>(), j["ratios"]["gloo_over_iperf3_rail0"].get<double>());
  EXPECT_GE(range["max"].get<double>(), j["ratios"]["gloo_over_iperf3_rail0"].get<double>());
  if (full) {
    EXPECT_GT(j["ratios"]["reccl_one_rail_over_gloo"].get<double>(), 0.0);
    EXPECT_GT(j["ratios"]["reccl_all_rails_over_iperf3_all_rails"].get<double>(), 0.0);
    EXPECT_GT(j["ratios"]["reccl_one_rail_over_iperf3_rail0"].get<double>(), 0.0);
    EXPECT_NE(out.find("reccl rail0 / gloo rail0"), std::string::npos) << out;
  }
  fs::remove_all(dir);
}

}  // namespace
