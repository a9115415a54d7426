#include <gtest/gtest.h>

#include "reccl/sim/fault_sequence.h"
#include "reccl/sim/scenario.h"

namespace reccl::sim {
namespace {

using nlohmann::json;

TEST(SimScenario, DefaultsAreTheSixPoliciesAndLlamaRates) {
  Scenario s = defaultScenario();
  ASSERT_TRUE(validateScenario(s).ok());
  std::vector<std::string> names;
  for (const auto& p : s.policies) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fail-stop", "completion-timer", "vccl", "r2ccl", "reccl", "reccl-no-failback"}));
  EXPECT_NEAR(s.faults.linkFaultsPerLinkDay, 42.0 / (16384 * 54), 1e-15);
  EXPECT_NEAR(s.faults.otherFailuresPerGpuDay, 377.0 / (16384 * 54), 1e-15);
  EXPECT_NEAR(findPolicy(s, "fail-stop")->detectS, 4.096e-6 * 1048576 * 7, 1e-9);
  EXPECT_NEAR(findPolicy(s, "vccl")->detectS, 7.516, 1e-3);
  EXPECT_DOUBLE_EQ(resolvedBwAfter(*findPolicy(s, "reccl"), s.cluster), 7.0 / 8);
}

TEST(SimScenario, AFileOverridesOnlyWhatItNames) {
  json j = json::parse(R"({"cluster": {"gpus": 64, "nics_per_host": 4},
    "job": {"restart_s": 60}, "faults": {"repair_s": {"median": 10, "p99": 100}},
    "policies": {"reccl": {"bw_after": 0.9, "holddown_s": 0.3, "damping": {"half_life_s": 0.2}},
                 "slow-reccl": {"base": "reccl", "detect_s": 2, "stall_s": 2.5}}})");
  auto r = applyScenarioJson(j, defaultScenario());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Scenario& s = r.value();
  EXPECT_EQ(s.cluster.gpus, 64);
  EXPECT_EQ(s.cluster.nicsPerHost, 4);
  EXPECT_EQ(s.cluster.gpusPerHost, 8);
  EXPECT_EQ(s.job.restartS, 60);
  EXPECT_EQ(s.job.checkpointIntervalS, 900);
  EXPECT_NEAR(s.faults.repairS.median(), 10, 1e-12);
  const PolicyParams* p = findPolicy(s, "reccl");
  EXPECT_EQ(p->bwAfter, 0.9);
  EXPECT_EQ(p->linkState.holdDownNs, 300'000'000u);
  EXPECT_EQ(p->linkState.damping.halfLifeNs, 200'000'000u);
  const PolicyParams* q = findPolicy(s, "slow-reccl");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->detectS, 2);
  EXPECT_EQ(q->stallS.median(), 2.5);
  EXPECT_TRUE(q->failBack);
  // The effective scenario reads back as itself.
  auto again = applyScenarioJson(scenarioToJson(s), defaultScenario());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(scenarioToJson(again.value()), scenarioToJson(s));
}

struct Bad {
  const char* json;
  const char* message;
};

class SimScenarioRejects : public ::testing::TestWithParam<Bad> {};
TEST_P(SimScenarioRejects, NamingTheField) {
  auto r = applyScenarioJson(json::parse(GetParam().json), defaultScenario());
  Status st = r.ok() ? validateScenario(r.value()) : r.status();
  ASSERT_FALSE(st.ok()) << GetParam().json;
  EXPECT_EQ(st.message(), GetParam().message);
}
INSTANTIATE_TEST_SUITE_P(
    All, SimScenarioRejects,
    ::testing::Values(
        Bad{"[]", "scenario: must be an object"},
        Bad{R"({"clusters": {}})", "scenario: unknown key \"clusters\""},
        Bad{R"({"version": 2})", "version: must be 1"},
        Bad{R"({"cluster": {"gpus": 0}})", "cluster.gpus: must be an integer in [1, 100000000]"},
        Bad{R"({"cluster": {"gpus": 1.5}})", "cluster.gpus: must be an integer in [1, 100000000]"},
        Bad{R"({"cluster": {"nics_per_host": 65}})", "cluster.nics_per_host: must be an integer in [1, 64]"},
        Bad{R"({"cluster": {"gpu": 8}})", "cluster: unknown key \"gpu\""},
        Bad{R"({"cluster": {"fused_nics": "yes"}})", "cluster.fused_nics: must be true or false"},
        Bad{R"({"cluster": {"fused_nics": true, "fused_ports": 3}})",
            "cluster.fused_ports: must be >= 2 and divide nics_per_host (8)"},
        Bad{R"({"job": {"days": 0}})", "job.days: must be a number in (0, 36500]"},
        Bad{R"({"job": {"comm_share": 1.5}})", "job.comm_share: must be a number in [0, 1]"},
        Bad{R"({"job": {"restart_s": "8 min"}})", "job.restart_s: must be a number in [0, 1000000000]"},
        Bad{R"({"job": {"checkpoint_interval_s": 0}})", "job.checkpoint_interval_s: must be a number in (0, 1000000000]"},
        Bad{R"({"faults": {"link_faults_per_link_day": -1}})", "faults.link_faults_per_link_day: must be a number in [0, 1000]"},
        Bad{R"({"faults": {"repair_s": {"median": 1}}})", "faults.repair_s.p99: missing"},
        Bad{R"({"faults": {"gray_bandwidth": 0}})", "faults.gray_bandwidth: must be a number in (0, 1]"},
        Bad{R"({"faults": {"flaps": 1}})", "faults: unknown key \"flaps\""},
        Bad{R"({"policies": []})", "policies: must be an object of policies by name"},
        Bad{R"({"policies": {"reccl": {"bw_after": 1.2}}})", "policies.reccl.bw_after: must be a number in (0, 1] or \"rebalanced\""},
        Bad{R"({"policies": {"reccl": {"scope": "rack"}}})", "policies.reccl.scope: must be \"host\" or \"fused\""},
        Bad{R"({"policies": {"reccl": {"detect": 1}}})", "policies.reccl: unknown key \"detect\""},
        Bad{R"({"policies": {"reccl": {"stall_s": {"median": 1}}}})", "policies.reccl.stall_s.p99: missing"},
        Bad{R"({"policies": {"reccl": {"gray_detect_s": -1}}})",
            "policies.reccl.gray_detect_s: must be a number >= 0, or null (gray loss not seen)"},
        Bad{R"({"policies": {"reccl": {"damping": {"reuse": 5000}}}})", "policies.reccl.damping.reuse: must not exceed suppress"},
        Bad{R"({"policies": {"reccl": {"damping": {"halflife_s": 1}}}})", "policies.reccl.damping: unknown key \"halflife_s\""},
        Bad{R"({"policies": {"mine": {"detect_s": 1}}})",
            "policies.mine.base: missing: a new policy starts from an existing one (\"base\": \"reccl\")"},
        Bad{R"({"policies": {"mine": {"base": "nccl"}}})", "policies.mine.base: no policy \"nccl\""},
        Bad{R"({"policies": {"reccl": {"base": "vccl"}}})", "policies.reccl.base: only a new policy has a base"}));

class SimTraceRejects : public ::testing::TestWithParam<Bad> {};
TEST_P(SimTraceRejects, NamingTheField) {
  ClusterShape c;
  c.gpus = 16;  // 2 hosts x 8 NICs
  auto r = parseTrace(json::parse(GetParam().json), c);
  ASSERT_FALSE(r.ok()) << GetParam().json;
  EXPECT_EQ(r.status().message(), GetParam().message);
}
INSTANTIATE_TEST_SUITE_P(
    All, SimTraceRejects,
    ::testing::Values(
        Bad{"{}", "faults: missing"},
        Bad{R"({"faults": {}})", "faults: must be an array"},
        Bad{R"({"faults": [], "hosts": 2})", "trace: unknown key \"hosts\""},
        Bad{R"({"faults": [3]})", "faults[0]: must be an object"},
        Bad{R"({"faults": [{"at_s": 1, "host": 0, "nic": 0, "duration_s": 1}]})", "faults[0].kind: missing"},
        Bad{R"({"faults": [{"kind": "cut", "at_s": 1}]})",
            "faults[0].kind: must be \"down\", \"flap\", \"gray\" or \"crash\""},
        Bad{R"({"faults": [{"kind": "crash", "at_s": 1}, {"kind": "down", "host": 0, "nic": 0, "duration_s": 1}]})",
            "faults[1].at_s: missing"},
        Bad{R"({"faults": [{"kind": "down", "at_s": -1, "host": 0, "nic": 0, "duration_s": 1}]})",
            "faults[0].at_s: must be a number in [0, 1000000000000]"},
        Bad{R"({"faults": [{"kind": "down", "at_s": 1, "host": 2, "nic": 0, "duration_s": 1}]})",
            "faults[0].host: must be an integer in [0, 1]"},
        Bad{R"({"faults": [{"kind": "down", "at_s": 1, "host": 0, "nic": 8, "duration_s": 1}]})",
            "faults[0].nic: must be an integer in [0, 7]"},
        Bad{R"({"faults": [{"kind": "down", "at_s": 1, "nic": 0, "duration_s": 1}]})",
            "faults[0].host: missing (a down names it)"},
        Bad{R"({"faults": [{"kind": "down", "at_s": 1, "host": 0, "nic": 0}]})",
            "faults[0].duration_s: missing (a down names it)"},
        Bad{R"({"faults": [{"kind": "gray", "at_s": 1, "host": 0, "nic": 0, "duration_s": 0}]})",
            "faults[0].duration_s: must be a number in (0, 1000000000000]"},
        Bad{R"({"faults": [{"kind": "flap", "at_s": 1, "host": 0, "nic": 0, "down_s": 0.1}]})",
            "faults[0].count: missing (a flap names it)"},
        Bad{R"({"faults": [{"kind": "flap", "at_s": 1, "host": 0, "nic": 0, "down_s": 0.1, "count": 0}]})",
            "faults[0].count: must be an integer in [1, 10000]"},
        Bad{R"({"faults": [{"kind": "crash", "at_s": 1, "host": 0}]})", "faults[0]: unknown key \"host\""}));

TEST(SimTrace, ParsesSortsAndKeepsEveryField) {
  ClusterShape c;
  c.gpus = 16;
  auto r = parseTrace(json::parse(R"({"version": 1, "faults": [
      {"kind": "flap", "at_s": 9, "host": 1, "nic": 7, "down_s": 0.1, "gap_s": 0.4, "count": 3},
      {"kind": "down", "at_s": 2, "host": 0, "nic": 1, "duration_s": 60},
      {"kind": "crash", "at_s": 5}]})"),
                      c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  FaultSequence q = FaultSequence::fixed(r.value(), 1);
  ASSERT_NE(q.at(2), nullptr);
  EXPECT_EQ(q.at(3), nullptr);
  EXPECT_EQ(q.at(0)->kind, FaultKind::kDown);
  EXPECT_EQ(q.at(0)->durationS, 60);
  EXPECT_EQ(q.at(1)->kind, FaultKind::kCrash);
  EXPECT_EQ(q.at(2)->kind, FaultKind::kFlap);
  EXPECT_EQ(q.at(2)->host, 1u);
  EXPECT_EQ(q.at(2)->nic, 7u);
  EXPECT_EQ(q.at(2)->count, 3u);
  EXPECT_EQ(q.at(2)->gapS, 0.4);
}

TEST(SimTrace, DrawnFaultsGrowWithTheLinksAndRepeatPerSeed) {
  Scenario s = defaultScenario();
  s.cluster.gpus = 32768;
  auto count = [&](uint64_t seed, double days) {
    FaultSequence q = FaultSequence::drawn(s, seed);
    int64_t n = 0;
    for (size_t i = 0; q.at(i)->atS < days * 86400; ++i)
      if (q.at(i)->kind != FaultKind::kCrash) ++n;
    return n;
  };
  const double perYear = 3 * 42.0 / (16384 * 54) * 32768 * 365;  // down + flap + gray
  int64_t n = count(1, 365);
  EXPECT_NEAR(double(n), perYear, 4 * std::sqrt(perYear));
  EXPECT_EQ(count(1, 365), n);
  EXPECT_NE(count(2, 365), n);
  s.cluster.gpus = 65536;
  EXPECT_NEAR(double(count(1, 365)), 2 * perYear, 4 * std::sqrt(2 * perYear));
}

}  // namespace
}  // namespace reccl::sim
