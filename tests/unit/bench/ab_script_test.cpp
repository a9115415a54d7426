// bench/ab.sh end to end at small sizes on a real 2-host testbed: the same build as A and B, two
// interleaved rounds, a JSON with one entry per size whose ratios lie in their ranges, nothing
// wrong, and the testbed gone afterwards; usage errors exit 64. Needs root; skipped otherwise.
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

TEST(AbScript, UsageErrorsAreRefused) {
  const fs::path dir = fs::temp_directory_path() / ("reccl-ab-usage-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string build = fs::path(RECCL_BIN_DIR).parent_path().string();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--a", build},                                  // no B
           {"--a", build, "--b", build, "--rounds", "0"},   // no rounds
           {"--a", build, "--b", build, "-f", "1"},         // a sweep that never grows
           {"--a", build, "--b", build, "--tolerance", "5"},
           {"--a", build, "--b", dir.string()}}) {          // no bin/
    std::vector<std::string> argv = {"/bin/bash", AB_SCRIPT};
    argv.insert(argv.end(), args.begin(), args.end());
    Child c(argv, {}, dir / "out.txt");
    EXPECT_EQ(c.wait(std::chrono::seconds(30)), 64) << slurp(dir / "out.txt");
  }
  fs::remove_all(dir);
}

TEST(AbScript, SameBuildBothSidesGivesOneRatioPerSize) {
  if (geteuid() != 0) GTEST_SKIP() << "the testbed needs root";
  if (std::system("command -v jq >/dev/null 2>&1") != 0) GTEST_SKIP() << "jq is not installed";
  const fs::path dir = fs::temp_directory_path() / ("reccl-ab-test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string name = "abt" + std::to_string(getpid() % 100000);
  const std::string build = fs::path(RECCL_BIN_DIR).parent_path().string();
  int rc;
  {
    Child c({"/bin/bash", AB_SCRIPT, "--a", build, "--b", build, "--name", name, "--rounds", "2", "-b", "8",
             "-e", "4K", "-n", "10", "-w", "2", "--out", (dir / "ab.json").string()},
            {}, dir / "out.txt");
    rc = c.wait(std::chrono::seconds(400));
  }
  const std::string out = slurp(dir / "out.txt");
  EXPECT_FALSE(fs::exists("/run/netns/" + name + "-h0")) << "ab.sh leaves no testbed behind";
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(slurp(dir / "ab.json"));
  EXPECT_EQ(j["wrong"], 0);
  EXPECT_EQ(j["rounds"], 2);
  ASSERT_EQ(j["sizes"].size(), 4u) << j.dump();  // 8, 64, 512, 4096
  int64_t expect = 8;
  for (const auto& s : j["sizes"]) {
    EXPECT_EQ(s["size"].get<int64_t>(), expect);
    expect *= 8;
    for (const char* k : {"in_place", "out_of_place"}) {
      const auto& r = s[k];
      EXPECT_GT(r["a_time_us"].get<double>(), 0.0) << s.dump();
      EXPECT_LE(r["min"].get<double>(), r["b_over_a_time"].get<double>()) << s.dump();
      EXPECT_GE(r["max"].get<double>(), r["b_over_a_time"].get<double>()) << s.dump();
    }
  }
  EXPECT_NE(out.find("B time / A time per size"), std::string::npos) << out;
  fs::remove_all(dir);
}

}  // namespace
