// Closed-form cases: one host, faults from a trace, every cost known, so the work a policy loses
// is a formula. Losses are in fault-free seconds of work over one simulated day.
#include <gtest/gtest.h>

#include <cmath>

#include "reccl/sim/replay.h"
#include "reccl/sim/simulate.h"

namespace reccl::sim {
namespace {

constexpr double kNcclRetry = 4.096e-6 * 1048576;  // NCCL_IB_TIMEOUT=20
constexpr double kNcclDetect = 7 * kNcclRetry;
constexpr double kStall = 0.02, kFailBack = 0.01, kComm = 0.2;

Scenario oneHost(int nics = 8) {
  Scenario s = defaultScenario();
  s.cluster.gpus = 8;
  s.cluster.nicsPerHost = nics;
  s.job.days = 1;
  s.job.commShare = kComm;
  s.job.checkpointIntervalS = 900;
  s.job.checkpointCostS = 0;
  s.job.restartS = 480;
  s.faults = FaultModel{};  // no drawn faults: the trace is all
  for (auto& p : s.policies)
    if (p.name.rfind("reccl", 0) == 0) {
      p.stallS = Dist::constant(kStall);
      p.failBackStallS = Dist::constant(kFailBack);
      p.bwAfter = 0.875;
    }
  return s;
}

// The job's rate at bandwidth share bw.
double rate(double bw) { return 1 / ((1 - kComm) + kComm / bw); }

FaultEvent down(double at, uint32_t nic, double d) {
  FaultEvent e;
  e.atS = at;
  e.kind = FaultKind::kDown;
  e.nic = nic;
  e.durationS = d;
  return e;
}

struct Outcome {
  double loss;  // work lost against the fault-free run
  RunStats run;
};

Outcome run(const Scenario& s, const std::string& policy, std::vector<FaultEvent> trace) {
  const Stop stop = Stop::of(s.job);
  FaultSequence none = FaultSequence::none();
  RunStats ff = replay(s, nullptr, none, stop);
  FaultSequence q = FaultSequence::fixed(std::move(trace), 1);
  const PolicyParams* p = findPolicy(s, policy);
  EXPECT_NE(p, nullptr) << policy;
  RunStats r = replay(s, p, q, stop);
  return {stop.workS > 0 ? r.wallS - ff.wallS : ff.workS - r.workS, r};
}

TEST(SimReplay, NoFaultsGiveRatioExactlyOneForEveryPolicy) {
  Scenario s = defaultScenario();  // checkpoint cost and restarts as by default
  s.faults.linkFaultsPerLinkDay = s.faults.flapsPerLinkDay = s.faults.grayPerLinkDay = 0;
  s.faults.otherFailuresPerGpuDay = 0;
  SimOptions o;
  o.seeds = 2;
  o.gpuSizes = {64, 32768};
  auto r = simulate(s, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const auto& size : r.value())
    for (const auto& p : size.policies)
      for (size_t k = 0; k < p.ratio.size(); ++k) {
        EXPECT_EQ(p.ratio[k], 1.0) << p.name;
        EXPECT_EQ(p.gpuHoursLost[k], 0.0) << p.name;
        EXPECT_EQ(p.runs[k].failovers + p.runs[k].linkAborts, 0) << p.name;
      }
}

TEST(SimReplay, FailStopLosesWorkSinceCheckpointPlusDetectionPlusRestart) {
  Outcome o = run(oneHost(), "fail-stop", {down(1000, 0, 7200)});
  EXPECT_NEAR(o.loss, (1000 - 900) + kNcclDetect + 480, 1e-9);
  EXPECT_EQ(o.run.linkAborts, 1);
  EXPECT_NEAR(o.run.lostWorkS, 100, 1e-9);
}

TEST(SimReplay, RecclLosesItsStallThenTheDegradedShareUntilFailBack) {
  const double d = 3600, hold = 1.0;  // the detector's default hold-down
  Outcome o = run(oneHost(), "reccl", {down(1000, 3, d)});
  EXPECT_NEAR(o.loss, kStall + (d + hold - kStall) * (1 - rate(0.875)) + kFailBack, 1e-6);
  EXPECT_EQ(o.run.failovers, 1);
  EXPECT_EQ(o.run.failbacks, 1);
  EXPECT_EQ(o.run.linkAborts, 0);
}

TEST(SimReplay, WithoutFailBackTheJobStaysDegradedToTheEnd) {
  Outcome o = run(oneHost(), "reccl-no-failback", {down(1000, 3, 3600)});
  EXPECT_NEAR(o.loss, kStall + (86400 - 1000 - kStall) * (1 - rate(0.875)), 1e-6);
  EXPECT_EQ(o.run.failbacks, 0);
}

TEST(SimReplay, VcclWaitsItsIbTimeoutThenRunsAtItsBandwidth) {
  const double detect = 7 * 4.096e-6 * 262144, d = 3600, hold = 1.0;
  Outcome o = run(oneHost(), "vccl", {down(1000, 3, d)});
  EXPECT_NEAR(o.loss, detect + (d + hold - detect) * (1 - rate(0.766)), 1e-6);
}

TEST(SimReplay, CompletionTimerFailsOverOnlyInsideFusedPorts) {
  Scenario s = oneHost();
  Outcome plain = run(s, "completion-timer", {down(1000, 3, 3600)});
  Outcome stop = run(s, "fail-stop", {down(1000, 3, 3600)});
  EXPECT_DOUBLE_EQ(plain.loss, stop.loss);
  EXPECT_EQ(plain.run.linkAborts, 1);

  s.cluster.fusedNics = true;  // pairs: NIC 3 fails over to NIC 2 only, which then carries both
  Outcome fused = run(s, "completion-timer", {down(1000, 3, 3600)});
  EXPECT_NEAR(fused.loss, kNcclDetect + (3600 + 0.2 - kNcclDetect) * (1 - rate(0.5)), 1e-6);
  // Both ports of one virtual NIC down: nowhere to go inside it.
  Outcome both = run(s, "completion-timer", {down(1000, 2, 3600), down(2000, 3, 3600)});
  EXPECT_EQ(both.run.failovers, 1);
  EXPECT_EQ(both.run.linkAborts, 1);
}

TEST(SimReplay, ADownShorterThanDetectionStallsToTheNextRetry) {
  Outcome stop = run(oneHost(), "fail-stop", {down(1000, 0, 5)});
  EXPECT_NEAR(stop.loss, 2 * kNcclRetry, 1e-9);
  EXPECT_EQ(stop.run.rideThroughs, 1);
  EXPECT_EQ(stop.run.linkAborts, 0);
  // reccl sees it in microseconds: a failover, five seconds degraded, the hold-down, fail-back.
  Outcome reccl = run(oneHost(), "reccl", {down(1000, 0, 5)});
  EXPECT_NEAR(reccl.loss, kStall + (5 + 1.0 - kStall) * (1 - rate(0.875)) + kFailBack, 1e-6);
}

TEST(SimReplay, AFaultWhileTheFailBackConnectsFindsTheLinkOutOfUse) {
  Scenario s = oneHost();
  for (auto& p : s.policies) p.failBackDelayS = Dist::constant(0.5);
  // Up at 1010, declared up at 1011, back in use at 1011.5 - but down again at 1011.2 for 1 s:
  // no second failover; back in use at 1012.2 + 1 + 0.5.
  Outcome o = run(s, "reccl", {down(1000, 0, 10), down(1011.2, 0, 1)});
  EXPECT_EQ(o.run.failovers, 1);
  EXPECT_EQ(o.run.failbacks, 1);
  EXPECT_NEAR(o.loss, kStall + (1013.7 - 1000 - kStall) * (1 - rate(0.875)) + kFailBack, 1e-6);
}

TEST(SimReplay, AFlapStormFailsOverOnceAndBackOnceAfterDamping) {
  FaultEvent flap;
  flap.atS = 1000;
  flap.kind = FaultKind::kFlap;
  flap.count = 10;
  flap.durationS = 0.1;
  flap.gapS = 0.5;
  // Stock NCCL: every down waits for the next retry; the waits chain.
  Outcome stop = run(oneHost(), "fail-stop", {flap});
  EXPECT_NEAR(stop.loss, 9 * 0.6 + kNcclRetry, 1e-9);
  EXPECT_EQ(stop.run.rideThroughs, 10);
  // reccl: out at the first down; the link comes back only after the storm, once its penalty
  // (1000 per flap, half-life 5 s) decayed below the reuse threshold: later than the hold-down.
  Outcome reccl = run(oneHost(), "reccl", {flap});
  EXPECT_EQ(reccl.run.failovers, 1);
  EXPECT_EQ(reccl.run.failbacks, 1);
  EXPECT_GT(reccl.run.degradedS, 5.5 + 1.0 + 1.0);
  EXPECT_LT(reccl.loss, stop.loss);
}

TEST(SimReplay, GrayLossSlowsAPolicyThatDoesNotSeeIt) {
  FaultEvent g;
  g.atS = 1000;
  g.kind = FaultKind::kGray;
  g.nic = 5;
  g.durationS = 600;
  const double gray = rate(0.5);  // faults.gray_bandwidth
  Outcome stop = run(oneHost(), "fail-stop", {g});
  EXPECT_NEAR(stop.loss, 600 * (1 - gray), 1e-6);
  // reccl: 1 s at the gray rate, a failover, degraded until 5 s of quiet after the episode.
  Outcome reccl = run(oneHost(), "reccl", {g});
  EXPECT_NEAR(reccl.loss, 1 * (1 - gray) + kStall + (600 - 1 - kStall + 5) * (1 - rate(0.875)) + kFailBack, 1e-6);
}

TEST(SimReplay, EveryNicOfAHostDownAbortsEvenWithFailover) {
  Outcome o = run(oneHost(2), "reccl", {down(1000, 0, 7200), down(2000, 1, 7200)});
  EXPECT_EQ(o.run.failovers, 1);
  EXPECT_EQ(o.run.linkAborts, 1);
  // Degraded from 1000.02 s; the last checkpoint before the second fault was at 1800 s.
  EXPECT_NEAR(o.run.lostWorkS, (2000 - 1800) * rate(0.875), 1e-6);
}

TEST(SimReplay, WorkModeReportsTheWallTimeWithCheckpointStops) {
  Scenario s = oneHost();
  s.job.workS = 10000;
  s.job.checkpointCostS = 10;
  FaultSequence none = FaultSequence::none();
  RunStats ff = replay(s, nullptr, none, Stop::of(s.job));
  EXPECT_NEAR(ff.wallS, 10000 + 11 * 10, 1e-9);  // checkpoints at 900, 1800, ..., 9900 of work
  EXPECT_DOUBLE_EQ(ff.workS, 10000);
  Outcome o = run(s, "reccl", {down(1000, 0, 100)});
  EXPECT_NEAR(o.loss, kStall + (100 + 1.0 - kStall) * (1 - rate(0.875)) + kFailBack, 1e-6);
}

}  // namespace
}  // namespace reccl::sim
