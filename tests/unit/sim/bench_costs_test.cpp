#include <gtest/gtest.h>

#include "reccl/sim/bench_costs.h"

namespace reccl::sim {
namespace {

using nlohmann::json;

// The parts of a `reccl-bench --fault-plan --json` file the simulator reads (the rest omitted).
json benchRun() {
  return json::parse(R"({"tool": "reccl-bench", "mode": "fault-plan",
    "environment": {"env": {"RECCL_HOLDDOWN_MS": "300"}},
    "faults": [{"index": 0, "failover": true, "stall_ms": 12.0, "recover_at_s": 1.0, "failed_back_at_s": 1.35},
               {"index": 1, "failover": true, "stall_ms": 30.0, "recover_at_s": 3.0, "failed_back_at_s": null},
               {"index": 2, "failover": false, "stall_ms": null},
               {"index": 3, "failover": true, "stall_ms": 8.0, "recover_at_s": 5.0, "failed_back_at_s": 5.32}],
    "summary": {"signal_after_fault_ms": {"n": 3, "p50": 0.12},
                "ratios": {"degraded_over_before": 0.8, "after_over_before": 1.0}}})");
}

TEST(SimBenchCosts, ReadsStallsDetectionAndBandwidth) {
  auto r = readBenchCosts(benchRun());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const BenchCosts& c = r.value();
  EXPECT_EQ(c.faults, 4);
  EXPECT_EQ(c.faultsWithFailover, 3);
  EXPECT_DOUBLE_EQ(c.stallS.quantile(0.0), 0.008);
  EXPECT_DOUBLE_EQ(c.stallS.quantile(0.5), 0.012);
  EXPECT_DOUBLE_EQ(c.stallS.quantile(0.99), 0.030);
  EXPECT_DOUBLE_EQ(c.detectS, 0.00012);
  EXPECT_DOUBLE_EQ(c.bwAfter, 0.8);
  // Recovery -> back on the link, less the run's 300 ms hold-down.
  EXPECT_EQ(c.failBacks, 2);
  EXPECT_NEAR(c.failBackDelayS.quantile(0.0), 0.02, 1e-12);
  EXPECT_NEAR(c.failBackDelayS.quantile(0.99), 0.05, 1e-12);

  Scenario s = defaultScenario();
  applyBenchCosts(s, c);
  for (const char* name : {"reccl", "reccl-no-failback"}) {
    const PolicyParams* p = findPolicy(s, name);
    EXPECT_DOUBLE_EQ(p->stallS.quantile(0.5), 0.012) << name;
    EXPECT_DOUBLE_EQ(p->failBackStallS.quantile(0.5), 0.012) << name;
    EXPECT_DOUBLE_EQ(p->bwAfter, 0.8) << name;
    EXPECT_NEAR(p->failBackDelayS.quantile(0.99), 0.05, 1e-12) << name;
  }
  EXPECT_DOUBLE_EQ(findPolicy(s, "vccl")->bwAfter, 0.766);
}

TEST(SimBenchCosts, WithoutItsHoldDownTheRunHadTheLibrarysDefault) {
  json j = benchRun();
  j.erase("environment");
  j["faults"][0]["failed_back_at_s"] = 2.2;  // 1.2 s after recovery; the default hold-down is 1 s
  auto r = readBenchCosts(j);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r.value().failBackDelayS.quantile(0.99), 0.2, 1e-12);
  EXPECT_EQ(r.value().failBackDelayS.quantile(0.0), 0.0);  // 5.32 - 5.0 - 1.0 < 0: none
}

TEST(SimBenchCosts, CapsBandwidthAtOneAndDetectionAtZero) {
  json j = benchRun();
  j["summary"]["ratios"]["degraded_over_before"] = 1.12;
  j["summary"]["signal_after_fault_ms"]["p50"] = -35.0;  // in-band: dated to the last ACK
  auto r = readBenchCosts(j);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().bwAfter, 1.0);
  EXPECT_EQ(r.value().detectS, 0.0);
}

struct Broken {
  const char* name;
  void (*edit)(json&);
  const char* message;
};
class SimBenchCostsRejects : public ::testing::TestWithParam<Broken> {};
TEST_P(SimBenchCostsRejects, NamingTheKey) {
  json j = benchRun();
  GetParam().edit(j);
  auto r = readBenchCosts(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), GetParam().message);
}
INSTANTIATE_TEST_SUITE_P(
    All, SimBenchCostsRejects,
    ::testing::Values(
        Broken{"NoTool", [](json& j) { j.erase("tool"); }, "costs: tool: missing"},
        Broken{"GlooFile", [](json& j) { j["tool"] = "gloo_bench"; }, "costs: tool: must be \"reccl-bench\""},
        Broken{"PlainRun", [](json& j) { j.erase("mode"); }, "costs: mode: missing"},
        Broken{"NoFaults", [](json& j) { j.erase("faults"); }, "costs: faults: missing"},
        Broken{"NoStall", [](json& j) { j["faults"][1].erase("stall_ms"); }, "costs: faults[1].stall_ms: missing"},
        Broken{"NoFailover", [](json& j) { j["faults"][0].erase("failover"); }, "costs: faults[0].failover: missing"},
        Broken{"NoneFailedOver",
               [](json& j) {
                 for (auto& f : j["faults"]) f["failover"] = false;
               },
               "costs: faults[].stall_ms: no fault failed over with a measured stall"},
        Broken{"NoSignal", [](json& j) { j["summary"].erase("signal_after_fault_ms"); },
               "costs: summary.signal_after_fault_ms: missing"},
        Broken{"NoSignalP50", [](json& j) { j["summary"]["signal_after_fault_ms"].erase("p50"); },
               "costs: summary.signal_after_fault_ms.p50: missing"},
        Broken{"NoRatio", [](json& j) { j["summary"]["ratios"].erase("degraded_over_before"); },
               "costs: summary.ratios.degraded_over_before: missing"},
        Broken{"NullRatio", [](json& j) { j["summary"]["ratios"]["degraded_over_before"] = nullptr; },
               "costs: summary.ratios.degraded_over_before: null (the run measured none)"}),
    [](const ::testing::TestParamInfo<Broken>& pi) { return std::string(pi.param.name); });

}  // namespace
}  // namespace reccl::sim
