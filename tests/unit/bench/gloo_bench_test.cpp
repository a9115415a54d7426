// gloo_bench end to end on loopback: two real processes rendezvous through a FileStore, move
// real bytes over Gloo's TCP transport, and rank 0 prints the checked table and the JSON.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_child.h"

namespace {

using reccl::benchtest::Child;
using reccl::benchtest::slurp;
namespace fs = std::filesystem;

class GlooBenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("reccl-gloo-test-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(GlooBenchTest, TwoRanksOnLoopbackProduceACheckedTableAndJson) {
  const fs::path store = dir_ / "store", json = dir_ / "out.json";
  std::vector<std::string> args = {GLOO_BENCH_PATH, "--iface", "lo",  "--store-dir", store.string(),
                                   "-b",            "1K",      "-e",  "1M",          "-f",
                                   "32",            "-n",      "3",   "-w",          "1",
                                   "--coll",        "allreduce,allgather,broadcast,gather,scatter",
                                   "--json",        json.string()};
  Child r1(args, {"RANK=1", "WORLD_SIZE=2"}, dir_ / "r1.txt");
  Child r0(args, {"RANK=0", "WORLD_SIZE=2"}, dir_ / "r0.txt");
  int rc0 = r0.wait(std::chrono::seconds(90));
  int rc1 = r1.wait(std::chrono::seconds(10));
  std::string out = slurp(dir_ / "r0.txt");
  ASSERT_EQ(rc0, 0) << out;
  ASSERT_EQ(rc1, 0) << slurp(dir_ / "r1.txt");
  EXPECT_NE(out.find("# Out of bounds values : 0 OK"), std::string::npos) << out;
  EXPECT_NE(out.find("# Collective: allreduce (gloo ring_chunked)"), std::string::npos) << out;
  EXPECT_NE(out.find("# Avg bus bandwidth"), std::string::npos);
  auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["tool"], "gloo_bench");
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["environment"]["nranks"], 2);
  // Sizes 1K, 32K, 1M for allreduce x 2 algorithms, allgather, broadcast, gather and scatter.
  ASSERT_EQ(j["rows"].size(), 18u) << j.dump(1);
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["library"], "gloo");
    const auto& t = row["in_place"].is_null() ? row["out_of_place"] : row["in_place"];
    EXPECT_EQ(t["wrong"], 0) << row.dump();
    EXPECT_GT(t["time_us"].get<double>(), 0.0);
  }
  EXPECT_FALSE(fs::exists(store)) << "rank 0 removes the rendezvous directory";
}

// --timeline: every timed iteration of rank 0 in the JSON (CLOCK_MONOTONIC start/end), also
// those done before Gloo failed: rank 1 is killed mid-loop and rank 0's partial loop is kept.
TEST_F(GlooBenchTest, TimelineHoldsEveryIterationAlsoWhenAPeerDies) {
  const fs::path store = dir_ / "store", json = dir_ / "out.json";
  auto args = [&](const char* n) {
    return std::vector<std::string>{GLOO_BENCH_PATH, "--iface", "lo", "--store-dir", store.string(), "--algo", "ring",
                                    "-b", "64K", "-e", "64K", "-n", n, "-w", "1", "--timeout-ms", "3000",
                                    "--timeline", "--json", json.string()};
  };
  {
    Child r1(args("6"), {"RANK=1", "WORLD_SIZE=2"}, dir_ / "r1.txt");
    Child r0(args("6"), {"RANK=0", "WORLD_SIZE=2"}, dir_ / "r0.txt");
    ASSERT_EQ(r0.wait(std::chrono::seconds(90)), 0) << slurp(dir_ / "r0.txt");
    ASSERT_EQ(r1.wait(std::chrono::seconds(10)), 0) << slurp(dir_ / "r1.txt");
    auto j = nlohmann::json::parse(slurp(json));
    ASSERT_TRUE(j.contains("timeline")) << j.dump(1);
    EXPECT_EQ(j["timeline"]["clock"], "CLOCK_MONOTONIC");
    ASSERT_EQ(j["timeline"]["loops"].size(), 1u);
    const auto& loop = j["timeline"]["loops"][0];
    EXPECT_TRUE(loop["completed"].get<bool>());
    EXPECT_EQ(loop["bytes"], 65536);
    ASSERT_EQ(loop["iterations"].size(), 6u);
    int64_t prevEnd = 0;
    for (const auto& it : loop["iterations"]) {
      int64_t a = it["start_mono_ns"], b = it["end_mono_ns"];
      EXPECT_GE(a, prevEnd);
      EXPECT_GT(b, a);
      EXPECT_NEAR(it["us"].get<double>(), (b - a) / 1e3, 1.0);
      prevEnd = b;
    }
  }
  fs::remove_all(store);
  fs::remove(json);
  auto r1 = std::make_unique<Child>(args("10000000"), std::vector<std::string>{"RANK=1", "WORLD_SIZE=2"}, dir_ / "r1b.txt");
  Child r0(args("10000000"), {"RANK=0", "WORLD_SIZE=2"}, dir_ / "r0b.txt");
  // The header of the collective is printed (and flushed) right before its loop.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (slurp(dir_ / "r0b.txt").find("# Collective: allreduce") == std::string::npos &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  r1.reset();  // SIGKILL mid-loop
  EXPECT_EQ(r0.wait(std::chrono::seconds(60)), 1) << slurp(dir_ / "r0b.txt");
  auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["status"], "failed");
  ASSERT_EQ(j["timeline"]["loops"].size(), 1u) << j.dump(1);
  EXPECT_FALSE(j["timeline"]["loops"][0]["completed"].get<bool>());
  EXPECT_GT(j["timeline"]["loops"][0]["iterations"].size(), 0u) << "iterations before the error lost";
}

TEST_F(GlooBenchTest, UsageErrorsNameTheArgument) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {{}, {}, "RANK"},
      {{"--coll", "alltoall"}, {"RANK=0", "WORLD_SIZE=1"}, "--coll"},
      {{"-d", "half"}, {"RANK=0", "WORLD_SIZE=1"}, "-d/--datatype"},
      {{"--algo", "tree"}, {"RANK=0", "WORLD_SIZE=1"}, "--algo"},
      {{"-t", "2"}, {"RANK=0", "WORLD_SIZE=1"}, "-t"},
      {{"-r", "3", "--coll", "broadcast"}, {"RANK=0", "WORLD_SIZE=2"}, "-r/--root"},
  };
  int i = 0;
  for (const Case& c : cases) {
    std::vector<std::string> argv{GLOO_BENCH_PATH};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    fs::path out = dir_ / ("usage" + std::to_string(i++) + ".txt");
    Child child(argv, c.env, out);
    EXPECT_EQ(child.wait(std::chrono::seconds(20)), 64) << slurp(out);
    EXPECT_NE(slurp(out).find(c.mentions), std::string::npos) << slurp(out);
  }
}

}  // namespace
