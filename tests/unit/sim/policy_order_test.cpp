// One seeded fault sequence, every policy: the differences follow from the policies' rules.
#include <gtest/gtest.h>

#include "reccl/sim/report.h"
#include "reccl/sim/simulate.h"

namespace reccl::sim {
namespace {

double lostToLinks(const SizeOutcome& r, const std::string& name) {
  for (const auto& p : r.policies)
    if (p.name == name) return meanCi95(p.gpuHoursLostToLinkFaults).mean;
  ADD_FAILURE() << "no policy " << name;
  return 0;
}

// 4,096 GPUs for 60 days, hard faults only, fused NICs (so the completion timer can fail over).
Scenario hardFaults() {
  Scenario s = defaultScenario();
  s.cluster.gpus = 4096;
  s.cluster.fusedNics = true;
  s.job.days = 60;
  s.faults.flapsPerLinkDay = s.faults.grayPerLinkDay = 0;
  return s;
}

TEST(SimPolicyOrder, WithEqualBandwidthTheFasterDetectorLosesLess) {
  Scenario s = hardFaults();
  for (auto& p : s.policies)
    if (p.failover) p.bwAfter = 0.875;
  SimOptions o;
  o.seed = 11;
  o.seeds = 3;
  auto r = simulate(s, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const SizeOutcome& so = r.value()[0];
  EXPECT_GT(so.faultCounts[0][0], 10);  // enough link faults to order anything
  EXPECT_LT(lostToLinks(so, "reccl"), lostToLinks(so, "r2ccl"));
  EXPECT_LT(lostToLinks(so, "r2ccl"), lostToLinks(so, "vccl"));
  EXPECT_LT(lostToLinks(so, "vccl"), lostToLinks(so, "completion-timer"));
  EXPECT_LT(lostToLinks(so, "completion-timer"), lostToLinks(so, "fail-stop"));
  EXPECT_LT(lostToLinks(so, "reccl"), lostToLinks(so, "reccl-no-failback"));
}

TEST(SimPolicyOrder, EverySeedPairsTheSameFaults) {
  Scenario s = defaultScenario();
  s.cluster.gpus = 4096;
  s.job.days = 60;
  SimOptions o;
  o.seeds = 4;
  auto r = simulate(s, o);
  ASSERT_TRUE(r.ok());
  const SizeOutcome& so = r.value()[0];
  const PolicyOutcome *stop = nullptr, *reccl = nullptr;
  for (const auto& p : so.policies) {
    if (p.name == "fail-stop") stop = &p;
    if (p.name == "reccl") reccl = &p;
  }
  ASSERT_TRUE(stop && reccl);
  for (size_t k = 0; k < stop->runs.size(); ++k) {
    // Common random numbers: both met the same link faults (bar those during restarts) and
    // the same other interruptions.
    EXPECT_EQ(stop->runs[k].otherAborts, reccl->runs[k].otherAborts);
    EXPECT_GT(stop->gpuHoursLostToLinkFaults[k], reccl->gpuHoursLostToLinkFaults[k]) << "seed " << k;
    EXPECT_GT(stop->runs[k].linkAborts, 0);
    EXPECT_EQ(reccl->runs[k].linkAborts, 0);
  }
  // The same seeds give the same numbers.
  auto again = simulate(s, o);
  ASSERT_TRUE(again.ok());
  RunDescription d;
  d.seeds = o.seeds;
  auto a = resultsToJson(s, d, r.value()), b = resultsToJson(s, d, again.value());
  a["results"][0].erase("elapsed_s");
  b["results"][0].erase("elapsed_s");
  EXPECT_EQ(a["results"], b["results"]);
}

TEST(SimPolicyOrder, LossesGrowWithTheCluster) {
  Scenario s = hardFaults();
  SimOptions o;
  o.seeds = 3;
  o.gpuSizes = {512, 4096, 32768};
  o.policies = {"fail-stop", "reccl"};
  auto r = simulate(s, o);
  ASSERT_TRUE(r.ok());
  const auto& v = r.value();
  for (const char* name : {"fail-stop", "reccl"}) {
    EXPECT_LT(lostToLinks(v[0], name), lostToLinks(v[1], name)) << name;
    EXPECT_LT(lostToLinks(v[1], name), lostToLinks(v[2], name)) << name;
  }
}

}  // namespace
}  // namespace reccl::sim
