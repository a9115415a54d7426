// `reccl-bench --fault-plan` on the testbed (2 hosts x 2 rails, one rank per host): one real
// switch-side link-down of host 0's rail 0 and its recovery, run by the bench's own plan thread.
// The bench checks every allreduce result bit for bit; the test checks its exit code and that the
// JSON holds a stall figure for the fault, a failover and a timeline.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "testbed_fixture.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Ran {
  int code = -1;
  std::string out;
};

Ran sh(const std::string& cmd) {
  Ran r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) r.out += buf;
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class FaultPlanBench : public reccl::test::TestbedTest<2, 2> {
 protected:
  void SetUp() override {
    reccl::test::TestbedTest<2, 2>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    dir_ = fs::temp_directory_path() / ("reccl-fault-bench-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(FaultPlanBench, OneSwitchSideLinkDownHasAStallFigure) {
  const std::string ns0 = netns(0);
  fs::path plan = dir_ / "plan.json";
  std::ofstream(plan) << R"({"version": 1, "actions": [{"at_ms": 800, "action": "link-down", "target": {"netns": ")"
                      << ns0 << R"(", "dev": "rail0", "side": "switch"}, "duration_ms": 1200}]})";
  fs::path out = dir_ / "out.json";
  fs::path log = dir_ / "plan.jsonl";
  // Short hold-down so the fail-back happens inside the run too.
  Ran r = sh(std::string(RECCL_CLI_PATH) + " testbed run --name " + testbed().name() +
             " --timeout 120 -- /usr/bin/env RECCL_HOLDDOWN_MS=200 RECCL_STALL_TIMEOUT_MS=300 " + RECCL_BENCH_PATH +
             " --fault-plan " + plan.string() + " --fault-log " + log.string() +
             " -e 8M -n 4 -w 1 --fault-tail-ms 1500 --json " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Out of bounds values : 0 OK"), std::string::npos) << r.out;
  std::ifstream f(out);
  json j = json::parse(f, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "unreadable json";
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["out_of_bounds"], 0);
  EXPECT_EQ(j["mode"], "fault-plan");
  ASSERT_EQ(j["faults"].size(), 1u) << j["faults"].dump();
  const json& fault = j["faults"][0];
  EXPECT_EQ(fault["action"], "link-down");
  EXPECT_TRUE(fault["failover"].get<bool>()) << fault.dump();
  ASSERT_TRUE(fault["stall_ms"].is_number()) << fault.dump();
  // Above zero and well below the run: the stall ends when the migrated paths carry the held-up
  // work (or start, for idle connections).
  EXPECT_GT(fault["stall_ms"].get<double>(), 0.0);
  EXPECT_LT(fault["stall_ms"].get<double>(), 1200.0);
  ASSERT_TRUE(fault["first_step_ms"].is_number()) << fault.dump();
  EXPECT_GT(fault["first_step_ms"].get<double>(), 0.0);
  EXPECT_TRUE(j["summary"]["stall_ms"]["p50"].is_number());
  EXPECT_GE(j["counters"]["failovers"].get<int>(), 1);
  EXPECT_GE(j["counters"]["failbacks"].get<int>(), 1) << "the rail came back 1.2 s later";
  EXPECT_GT(j["iterations"].size(), 4u);
  // The plan's record: the fault syscall's CLOCK_MONOTONIC start inside the run.
  const json& rec = j["plan"]["records"][0];
  EXPECT_EQ(rec["action"], "link-down");
  EXPECT_TRUE(rec["ok"].get<bool>());
  EXPECT_GT(rec["start_mono_ns"].get<int64_t>(), j["t0_mono_ns"].get<int64_t>());
  EXPECT_TRUE(fs::exists(log));
  // The plan put the switch port back.
  EXPECT_TRUE(ping(0, 1, 0)) << "rail 0 still down after the run";
}

// The in-process detector loads its BPF programs on a thread of its own after init (the NIC
// poll watches meanwhile); the bench times only once it is up (recclCommStats_t
// .faultSourceStarting), so its header names the BPF source, not the poll it starts with.
TEST_F(FaultPlanBench, PlainRunTimesOnlyOnceTheDetectorIsUp) {
  Ran r = sh(std::string(RECCL_CLI_PATH) + " testbed run --name " + testbed().name() +
             " --timeout 120 -- /usr/bin/env RECCL_DETECTOR=bpf " + RECCL_BENCH_PATH + " -b 8 -e 8 -n 5 -w 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# fault source: bpf:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("for it before timing)"), std::string::npos) << r.out;
}

TEST_F(FaultPlanBench, BadPlanIsAUsageError) {
  fs::path plan = dir_ / "bad.json";
  std::ofstream(plan) << R"({"version": 1, "actions": [{"at_ms": -1, "action": "link-down"}]})";
  Ran r = sh(std::string(RECCL_BENCH_PATH) + " --fault-plan " + plan.string());
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find("--fault-plan"), std::string::npos) << r.out;
  r = sh(std::string(RECCL_BENCH_PATH) + " --fault-plan " + plan.string() + " --coll allgather");
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find("--coll"), std::string::npos) << r.out;
  // A background device that no action targets (misspelt): the real one's flaps would count as faults.
  fs::path two = dir_ / "two.json";
  std::ofstream(two) << R"({"version": 1, "actions": [
      {"at_ms": 0, "action": "link-down", "target": {"netns": "tb-h0", "dev": "rail0"}, "duration_ms": 10},
      {"at_ms": 0, "action": "link-down", "target": {"netns": "tb-h1", "dev": "rail2"}, "duration_ms": 10}]})";
  r = sh(std::string(RECCL_BENCH_PATH) + " --fault-plan " + two.string() + " --fault-background tb-h1/rail3");
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find("--fault-background: no action of the plan targets tb-h1/rail3"), std::string::npos) << r.out;
}

// A target in the caller's own namespace is refused outside the lab; inside it (a VM is one host,
// its rails in its root namespace) the lab's management NIC still is. The device does not exist
// here, so a check that let the plan through would fail on it (exit 1) and change nothing.
TEST_F(FaultPlanBench, RootNamespaceOutsideTheLabAndTheLabsManagementNicAreUsageErrors) {
  fs::path plan = dir_ / "root.json";
  std::ofstream(plan) << R"({"version": 1, "actions": [{"at_ms": 0, "action": "link-down",
                             "target": {"netns": "", "dev": "rcltest0"}, "duration_ms": 10}]})";
  Ran r = sh("env -u RECCL_TEST_LAB " + std::string(RECCL_BENCH_PATH) + " --fault-plan " + plan.string());
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find("root network namespace"), std::string::npos) << r.out;
  r = sh("env RECCL_TEST_LAB=1 RECCL_LAB_NIC=rcltest0 " + std::string(RECCL_BENCH_PATH) + " --fault-plan " +
         plan.string());
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find("management nic rcltest0"), std::string::npos) << r.out;
}

}  // namespace
