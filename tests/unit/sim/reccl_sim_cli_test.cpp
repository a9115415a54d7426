// reccl-sim as users run it: the one-line run, a sweep with its figure, bad files refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench_child.h"

namespace {

using nlohmann::json;
using reccl::benchtest::Child;
using reccl::benchtest::slurp;
namespace fs = std::filesystem;

class SimCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("reccl-sim-cli-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Exit code; stdout and stderr together in out_.
  int sim(std::vector<std::string> args) {
    args.insert(args.begin(), RECCL_SIM_PATH);
    Child c(args, {}, dir_ / "out.txt");
    int rc = c.wait(std::chrono::seconds(120));
    out_ = slurp(dir_ / "out.txt");
    return rc;
  }
  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  fs::path dir_;
  std::string out_;
};

TEST_F(SimCli, TheOneLineRunListsEveryPolicyInItsJson) {
  fs::path j = dir_ / "out.json";
  ASSERT_EQ(sim({"--gpus", "32768", "--days", "365", "--seed", "1", "--json", j}), 0) << out_;
  json r = json::parse(slurp(j));
  ASSERT_EQ(r["policies"].size(), 6u);
  for (const auto& p : r["policies"]) {
    double ratio = p["effective_time_ratio"]["mean"];
    double lost = p["gpu_hours_lost"]["mean"];
    EXPECT_GT(ratio, 0.5) << p["name"];
    EXPECT_LT(ratio, 1.0) << p["name"];
    EXPECT_GT(lost, 0) << p["name"];
  }
  EXPECT_EQ(r["gpus"], 32768);
  EXPECT_GT(r["results"][0]["faults_per_run"]["down"]["mean"].get<double>(), 100);
  EXPECT_NE(out_.find("reccl-no-failback"), std::string::npos) << out_;
}

TEST_F(SimCli, ASweepDrawsItsFigure) {
  fs::path png = dir_ / "loss.png";
  int rc = sim({"--sweep-gpus", "64,512,4096", "--days", "30", "--seeds", "3", "--plot", png, "--progress"});
  if (rc == 77) GTEST_SKIP() << "gnuplot not installed: " << out_;
  ASSERT_EQ(rc, 0) << out_;
  std::string head = slurp(png).substr(0, 8);
  EXPECT_EQ(head, std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_NE(out_.find("GPU-hours lost to link faults per run"), std::string::npos) << out_;
  EXPECT_NE(out_.find("100 % 72/72 runs"), std::string::npos) << out_;  // 3 sizes x 3 seeds x (6 policies + 2 references)
}

TEST_F(SimCli, ThePrintedScenarioReadsBackAsItself) {
  ASSERT_EQ(sim({"--print-scenario", "--gpus", "1024", "--fused"}), 0) << out_;
  std::string first = out_;
  fs::path f = write("scenario.json", first);
  ASSERT_EQ(sim({"--print-scenario", "--scenario", f}), 0) << out_;
  EXPECT_EQ(out_, first);
  EXPECT_EQ(json::parse(first)["cluster"]["gpus"], 1024);
}

struct BadInput {
  const char* option;
  const char* file;
  const char* message;
};
class SimCliRefuses : public SimCli, public ::testing::WithParamInterface<BadInput> {};
TEST_P(SimCliRefuses, ABadFileNamingTheField) {
  fs::path f = write("bad.json", GetParam().file);
  EXPECT_EQ(sim({GetParam().option, f}), 64) << out_;
  EXPECT_NE(out_.find(GetParam().message), std::string::npos) << out_;
}
INSTANTIATE_TEST_SUITE_P(
    All, SimCliRefuses,
    ::testing::Values(BadInput{"--scenario", R"({"job": {"restart": 60}})", "job: unknown key \"restart\""},
                      BadInput{"--scenario", "{", "not JSON"},
                      BadInput{"--scenario", R"({"job": {"days": 1e400}})", "number overflow"},
                      BadInput{"--trace", R"({"faults": [{"at_s": 1e400}]})", "number overflow"},
                      BadInput{"--trace", R"({"faults": [{"kind": "down", "at_s": 1, "host": 99999, "nic": 0, "duration_s": 5}]})",
                               "faults[0].host: must be an integer in [0, 4095]"},
                      BadInput{"--costs", R"({"tool": "reccl-bench", "mode": "fault-plan", "faults": []})",
                               "faults[].stall_ms: no fault failed over"}));

TEST_F(SimCli, UsageErrorsExit64) {
  EXPECT_EQ(sim({"--seeds", "0"}), 64) << out_;
  // Not a quiet run of the defaults, nor a wrapped seed.
  for (const char* opt : {"--days", "--work-s"})
    for (const char* v : {"nan", "inf"}) {
      EXPECT_EQ(sim({opt, v}), 64) << opt << " " << v << ": " << out_;
      EXPECT_NE(out_.find(opt), std::string::npos) << out_;
    }
  EXPECT_EQ(sim({"--seed", "-1"}), 64) << out_;
  EXPECT_EQ(sim({"--policies", "nccl"}), 64) << out_;
  EXPECT_NE(out_.find("no policy \"nccl\""), std::string::npos) << out_;
  EXPECT_EQ(sim({"--plot", (dir_ / "x.png").string()}), 64) << out_;
  EXPECT_EQ(sim({"--help"}), 0);
  EXPECT_NE(out_.find("EXAMPLES"), std::string::npos);
}

}  // namespace
