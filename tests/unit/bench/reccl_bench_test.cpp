// reccl-bench end to end through the real library: ranks as threads (-t) and ranks as processes
// launched torchrun-style on loopback; every collective, type and op with odd sizes, each result
// checked element by element by the benchmark itself (exit 0 only when nothing is wrong).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../free_port.h"
#include "bench_child.h"

namespace {

using reccl::benchtest::Child;
using reccl::benchtest::slurp;
namespace fs = std::filesystem;

class RecclBenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("reccl-bench-test-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs reccl-bench once (as one process) and returns its exit code; output in out.txt.
  int runOnce(std::vector<std::string> args, std::vector<std::string> env = {}) {
    args.insert(args.begin(), RECCL_BENCH_PATH);
    Child c(args, env, dir_ / "out.txt");
    return c.wait(std::chrono::seconds(240));
  }
  std::string out() { return slurp(dir_ / "out.txt"); }
  fs::path dir_;
};

using reccl::test::freePort;

TEST_F(RecclBenchTest, EveryCollectiveTypeAndOpAsThreadsIsExact) {
  for (const char* ranks : {"2", "3"}) {
    const fs::path json = dir_ / (std::string("t") + ranks + ".json");
    int rc = runOnce({"-t", ranks, "--coll", "all", "-d", "all", "-o", "all", "-r", "-1", "-b", "0", "-e", "3000",
                      "-i", "1499", "-n", "2", "-w", "1", "--json", json.string()});
    ASSERT_EQ(rc, 0) << out();
    EXPECT_NE(out().find("# Out of bounds values : 0 OK"), std::string::npos) << out();
    auto j = nlohmann::json::parse(slurp(json));
    EXPECT_EQ(j["status"], "ok");
    EXPECT_EQ(j["environment"]["nranks"], std::stoi(ranks));
    const int n = std::stoi(ranks);
    // Sizes 0, 1499, 2998 bytes x 10 types x (allreduce, reducescatter: 6 ops, mulsum included;
    // reduce: 6 ops x n roots; broadcast, gather, scatter: n roots; allgather, alltoall, sendrecv: 1).
    size_t perSizeAndType = 6 + 6 + 6 * size_t(n) + 3 * size_t(n) + 3;
    EXPECT_EQ(j["rows"].size(), 3 * 10 * perSizeAndType) << ranks << " ranks";
    for (const auto& row : j["rows"]) {
      EXPECT_EQ(row["out_of_place"]["wrong"], 0) << row.dump();
      if (!row["in_place"].is_null()) {
        EXPECT_EQ(row["in_place"]["wrong"], 0) << row.dump();
      }
    }
  }
}

TEST_F(RecclBenchTest, AllReduceLargeOddCountAsThreads) {
  int rc = runOnce({"-t", "4", "-d", "float,bfloat16,int8", "-o", "sum,avg", "-b", "4000012", "-e", "4000012",
                    "-n", "1", "-w", "0"});
  ASSERT_EQ(rc, 0) << out();
  EXPECT_NE(out().find("# Out of bounds values : 0 OK"), std::string::npos) << out();
}

TEST_F(RecclBenchTest, RanksAsProcessesFromTheLauncherEnvironment) {
  const int port = freePort();
  ASSERT_GT(port, 0);
  std::vector<std::string> args = {RECCL_BENCH_PATH, "--coll", "allreduce,allgather,broadcast", "-b", "8",
                                   "-e",              "1M",     "-f",                            "16", "-n",
                                   "3",               "-w",     "1", "--json", (dir_ / "p.json").string()};
  auto env = [&](int rank) {
    return std::vector<std::string>{"RANK=" + std::to_string(rank), "WORLD_SIZE=2", "LOCAL_RANK=" + std::to_string(rank),
                                    "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)};
  };
  Child r0(args, env(0), dir_ / "r0.txt");
  Child r1(args, env(1), dir_ / "r1.txt");
  int rc0 = r0.wait(std::chrono::seconds(120));
  int rc1 = r1.wait(std::chrono::seconds(30));
  ASSERT_EQ(rc0, 0) << slurp(dir_ / "r0.txt");
  ASSERT_EQ(rc1, 0) << slurp(dir_ / "r1.txt");
  EXPECT_NE(slurp(dir_ / "r0.txt").find("# Out of bounds values : 0 OK"), std::string::npos);
  EXPECT_EQ(slurp(dir_ / "r1.txt").find("# Out of bounds"), std::string::npos) << "only rank 0 prints";
  auto j = nlohmann::json::parse(slurp(dir_ / "p.json"));
  EXPECT_EQ(j["environment"]["nranks"], 2);
  EXPECT_EQ(j["environment"]["env"]["WORLD_SIZE"], "2");
}

TEST_F(RecclBenchTest, BadArgumentsExitWithUsageAndNameTheArgument) {
  EXPECT_EQ(runOnce({"-t", "2", "-d", "float9"}), 64);
  EXPECT_NE(out().find("-d/--datatype"), std::string::npos) << out();
  EXPECT_EQ(runOnce({"-t", "2", "--coll", "reduce", "-r", "5", "-b", "8", "-e", "8"}), 64);
  EXPECT_NE(out().find("-r/--root"), std::string::npos) << out();
  EXPECT_EQ(runOnce({"--help"}), 0);
  EXPECT_NE(out().find("Examples"), std::string::npos);
}

}  // namespace

namespace {

// With a shim that corrupts one element of every multi-element float allreduce result, the
// benchmark must report the wrong elements, print FAILED and exit 1.
TEST_F(RecclBenchTest, WrongResultsAreCountedAndFailTheRun) {
  const fs::path json = dir_ / "bad.json";
  int rc = runOnce({"-t", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--json", json.string()},
                   {std::string("LD_PRELOAD=") + CORRUPT_SHIM_PATH});
  EXPECT_EQ(rc, 1) << out();
  // Element 0 on both ranks, out of place and in place.
  EXPECT_NE(out().find("# Out of bounds values : 4 FAILED"), std::string::npos) << out();
  auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["status"], "failed");
  EXPECT_EQ(j["rows"][0]["out_of_place"]["wrong"], 2);
  EXPECT_EQ(j["rows"][0]["in_place"]["wrong"], 2);
}

}  // namespace
