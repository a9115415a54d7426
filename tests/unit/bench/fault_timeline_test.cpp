// reccl-bench --fault-plan's analysis on made-up timelines: stall, windows, counters.
#include <gtest/gtest.h>

#include <algorithm>

#include "fault_timeline.h"

namespace {

using reccl::bench::analyzeFaults;
using reccl::bench::FaultMoment;
using reccl::bench::IterationSample;
using reccl::bench::percentile;
using reccl::bench::stampAsAge;
using reccl::bench::stampFromAge;

constexpr int64_t kMs = 1'000'000;

// Iterations of 100 ms back to back from t = 0 (stats read 1 ms after each end), bandwidth 2 on
// two rails, 1 while degraded [degradedFrom, degradedTo).
std::vector<IterationSample> timeline(int n, int64_t degradedFrom, int64_t degradedTo) {
  std::vector<IterationSample> s;
  for (int i = 0; i < n; ++i) {
    IterationSample x;
    x.startNs = i * 100 * kMs;
    x.endNs = x.startNs + 99 * kMs;
    x.statsNs = x.endNs + 1 * kMs;
    x.busBw = x.startNs >= degradedFrom && x.endNs < degradedTo ? 1.0 : 2.0;
    s.push_back(x);
  }
  return s;
}

TEST(FaultTimeline, StallWindowsAndFailBack) {
  auto s = timeline(40, 1100 * kMs, 2000 * kMs);
  // Fault at 1050 ms inside iteration 10; the migrated path's first step at 1062 ms; the
  // detector's signal at 1050.2 ms; 9 ms signal -> switch. Recovery at 2000 ms, fail-back seen
  // after iteration 24.
  for (auto& x : s) {
    if (x.statsNs >= 1100 * kMs) {
      x.failovers = 2;
      x.firstStepNs = 1062 * kMs;
      x.signalNs = 1050 * kMs + 200'000;
      x.commitNs = x.signalNs + 9 * kMs;
    }
    if (x.statsNs >= 2500 * kMs) x.failbacks = 2;
  }
  FaultMoment f{1050 * kMs, 2000 * kMs, "link-down", "tb-h0/rail0 (switch side)"};
  auto j = analyzeFaults(s, {f}, 0);
  const auto& r = j["faults"][0];
  EXPECT_TRUE(r["in_collective"].get<bool>());
  EXPECT_TRUE(r["failover"].get<bool>());
  EXPECT_NEAR(r["stall_ms"].get<double>(), 12.0, 1e-9);
  EXPECT_NEAR(r["signal_after_fault_ms"].get<double>(), 0.2, 1e-9);
  EXPECT_NEAR(r["fault_to_switch_ms"].get<double>(), 9.0, 1e-9);
  EXPECT_NEAR(r["resume_after_switch_ms"].get<double>(), 2.8, 1e-9);
  EXPECT_NEAR(r["first_step_ms"].get<double>(), 12.0, 1e-9) << "no resume stamp: the first step is the stall";
  EXPECT_DOUBLE_EQ(r["busbw_before_gbps"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(r["busbw_degraded_gbps"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(r["busbw_after_gbps"].get<double>(), 2.0);
  EXPECT_NEAR(r["failed_back_at_s"].get<double>(), 2.499, 1e-9);
  // before: iterations 0..9; degraded: 11..19; after: from 25 on.
  EXPECT_EQ(r["iterations_before_degraded_after"], nlohmann::json({10, 9, 15}));
  EXPECT_EQ(j["summary"]["faults_with_failover"], 1);
  EXPECT_NEAR(j["summary"]["ratios"]["degraded_over_before"].get<double>(), 0.5, 1e-9);
}

TEST(FaultTimeline, NoFailoverMeansNoStall) {
  auto s = timeline(20, 0, 0);
  auto j = analyzeFaults(s, {FaultMoment{500 * kMs, 800 * kMs, "link-down", "x"}}, 0);
  EXPECT_FALSE(j["faults"][0]["failover"].get<bool>());
  EXPECT_TRUE(j["faults"][0]["stall_ms"].is_null());
  EXPECT_EQ(j["summary"]["stall_ms"]["n"], 0);
}

TEST(FaultTimeline, FaultBetweenTwoCallsIsMigratedBeforeTheNextCall) {
  // The fault lands after iteration 5 ended (599 ms) but before its counters were read
  // (600 ms): they already hold the failover and the first step (stamped by the small
  // agreeing allreduce). It still counts, outside a call.
  auto s = timeline(20, 0, 0);
  for (auto& x : s)
    if (x.statsNs >= 600 * kMs) {
      x.failovers = 1;
      x.firstStepNs = 599 * kMs + 800'000;
    }
  auto j = analyzeFaults(s, {FaultMoment{599 * kMs + 300'000, -1, "link-down", "x"}}, 0);
  const auto& r = j["faults"][0];
  EXPECT_FALSE(r["in_collective"].get<bool>());
  EXPECT_TRUE(r["failover"].get<bool>());
  EXPECT_NEAR(r["stall_ms"].get<double>(), 0.5, 1e-9);
  EXPECT_TRUE(r["busbw_after_gbps"].is_null()) << "no recovery, no after window";
}

TEST(FaultTimeline, AFirstStepStampedBeforeTheFailoverIsCountedStillCounts) {
  // Seen in a 100-fault run: the fault lands between two calls (after iteration 5 ended at
  // 599 ms), the new path's first step is stamped at 600.5 ms, and the counters read at 601 ms
  // already hold that stamp but not yet the failover (counted with the commit's log line, after
  // the path started), nor its signal; the next read (701 ms) holds the count (the passive end's,
  // counted first), the one after (801 ms) the initiator's signal and commit stamps too. The
  // fault failed over, with its signal and switch times.
  auto s = timeline(20, 0, 0);
  s[5].statsNs = 601 * kMs;
  for (auto& x : s) {
    if (x.statsNs >= 601 * kMs) x.firstStepNs = 600 * kMs + 500'000;
    if (x.statsNs >= 700 * kMs) x.failovers = 1;
    if (x.statsNs >= 800 * kMs) {
      x.failovers = 2;
      x.signalNs = 599 * kMs + 400'000;
      x.commitNs = 600 * kMs;
    }
  }
  auto j = analyzeFaults(s, {FaultMoment{599 * kMs + 300'000, -1, "link-down", "x"}}, 0);
  const auto& r = j["faults"][0];
  EXPECT_TRUE(r["failover"].get<bool>());
  EXPECT_NEAR(r["stall_ms"].get<double>(), 1.2, 1e-9);
  EXPECT_NEAR(r["signal_after_fault_ms"].get<double>(), 0.1, 1e-9);
  EXPECT_NEAR(r["fault_to_switch_ms"].get<double>(), 0.6, 1e-9);
  EXPECT_EQ(j["summary"]["faults_with_failover"], 1);
}

TEST(FaultTimeline, StallEndsWhenTheHeldUpWorkMovesNotAtTheNextCall) {
  // Fault at 1090 ms, late in iteration 10 (ends 1099 ms): one connection had a step
  // outstanding, its first ack over the new path at 1093 ms; the other was idle, its new path
  // started at 1092 ms. The first step of any new path comes with the next call's first step
  // at 1105 ms. The fail-back after the recovery (2000 ms) leaves the stamps as they are.
  auto s = timeline(40, 0, 0);
  for (auto& x : s) {
    if (x.statsNs >= 1100 * kMs) {
      x.failovers = 2;
      x.firstStepNs = 1105 * kMs;
      x.resumeNs = 1093 * kMs;
      x.signalNs = 1090 * kMs + 500'000;
      x.commitNs = 1092 * kMs;
    }
    if (x.statsNs >= 2100 * kMs) x.failbacks = 2;
  }
  auto j = analyzeFaults(s, {FaultMoment{1090 * kMs, 2000 * kMs, "link-down", "x"}}, 0);
  const auto& r = j["faults"][0];
  EXPECT_NEAR(r["stall_ms"].get<double>(), 3.0, 1e-9);
  EXPECT_NEAR(r["first_step_ms"].get<double>(), 15.0, 1e-9);
  EXPECT_NEAR(r["resume_after_switch_ms"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(j["summary"]["stall_ms"]["p99"].get<double>(), 3.0, 1e-9);
  EXPECT_NEAR(j["summary"]["first_step_ms"]["p99"].get<double>(), 15.0, 1e-9);
}

TEST(FaultTimeline, ACallThatSpansTheFaultTheFailoverAndTheFailBackShowsTheFailover) {
  // A slow link: one 500 ms call (1000..1499 ms) holds the fault at 1050 ms, its failover (held-up
  // work moving again at 1056 ms, first step 1057 ms), the recovery at 1300 ms and the fail-back.
  // The counters read after that call hold both counts and the failover's stamps.
  std::vector<IterationSample> s;
  for (int i = 0; i < 8; ++i) {
    IterationSample x;
    x.startNs = i * 500 * kMs;
    x.endNs = x.startNs + 499 * kMs;
    x.statsNs = x.endNs + 1 * kMs;
    x.busBw = 1.0;
    if (x.statsNs >= 1500 * kMs) {
      x.failovers = 2;
      x.failbacks = 2;
      x.firstStepNs = 1057 * kMs;
      x.resumeNs = 1056 * kMs;
      x.signalNs = 1050 * kMs + 100'000;
      x.commitNs = 1053 * kMs;
    }
    s.push_back(x);
  }
  auto j = analyzeFaults(s, {FaultMoment{1050 * kMs, 1300 * kMs, "carrier-off", "x"}}, 0);
  const auto& r = j["faults"][0];
  EXPECT_TRUE(r["failover"].get<bool>());
  EXPECT_NEAR(r["stall_ms"].get<double>(), 6.0, 1e-9);
  EXPECT_NEAR(r["first_step_ms"].get<double>(), 7.0, 1e-9);
  EXPECT_NEAR(r["failed_back_at_s"].get<double>(), 1.499, 1e-9);
}

TEST(FaultTimeline, AFailoverAfterTheRecoveryEndsItsStallThere) {
  // A slow source: the link was down 1050..1150 ms, the failover came at 1400 ms (work moving
  // again at 1405 ms); the stall runs to there, not to some earlier or missing stamp.
  auto s = timeline(40, 0, 0);
  for (auto& x : s)
    if (x.statsNs >= 1500 * kMs) {
      x.failovers = 2;
      x.firstStepNs = 1406 * kMs;
      x.resumeNs = 1405 * kMs;
      x.signalNs = 1398 * kMs;
      x.commitNs = 1403 * kMs;
    }
  auto j = analyzeFaults(s, {FaultMoment{1050 * kMs, 1150 * kMs, "carrier-off", "x"}}, 0);
  const auto& r = j["faults"][0];
  EXPECT_TRUE(r["failover"].get<bool>());
  EXPECT_NEAR(r["stall_ms"].get<double>(), 355.0, 1e-9);
  EXPECT_NEAR(r["first_step_ms"].get<double>(), 356.0, 1e-9);
}

TEST(FaultTimeline, AMoveOffAGrayRailAfterTheRecoveryIsNotTheFaultsStall) {
  // Failover at 1050 ms, work moving again at 1056 ms; recovery at 1300 ms, then a move off a
  // gray rail at 1600 ms stamps again (a move away from a fault, not a fail-back).
  auto s = timeline(40, 0, 0);
  for (auto& x : s) {
    if (x.statsNs >= 1100 * kMs) {
      x.failovers = 2;
      x.firstStepNs = 1057 * kMs;
      x.resumeNs = 1056 * kMs;
    }
    if (x.statsNs >= 1700 * kMs) {
      x.failovers = 3;
      x.firstStepNs = 1601 * kMs;
      x.resumeNs = 1600 * kMs;
    }
  }
  auto j = analyzeFaults(s, {FaultMoment{1050 * kMs, 1300 * kMs, "carrier-off", "x"}}, 0);
  EXPECT_NEAR(j["faults"][0]["stall_ms"].get<double>(), 6.0, 1e-9);
}

TEST(FaultTimeline, AFaultWhileTheLastFailBackIsPendingIsMarked) {
  // The first fault's connections are still on the other rail (fail-back held down) when the
  // second lands on their old rail: nothing on it to move.
  auto s = timeline(60, 0, 0);
  for (auto& x : s) {
    if (x.statsNs >= 1100 * kMs) {
      x.failovers = 2;
      x.firstStepNs = 1055 * kMs;
      x.resumeNs = 1055 * kMs;
    }
    if (x.statsNs >= 3700 * kMs) x.failbacks = 2;
  }
  auto j = analyzeFaults(s,
                         {FaultMoment{1050 * kMs, 1300 * kMs, "carrier-off", "x"},
                          FaultMoment{3350 * kMs, 3600 * kMs, "carrier-off", "x"}},
                         0);
  EXPECT_FALSE(j["faults"][0]["fail_back_pending"].get<bool>());
  EXPECT_TRUE(j["faults"][0]["failover"].get<bool>());
  EXPECT_TRUE(j["faults"][1]["fail_back_pending"].get<bool>());
  EXPECT_FALSE(j["faults"][1]["failover"].get<bool>());
}

TEST(FaultTimeline, PercentileIsNearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(percentile(v, 0.5), 50);
  EXPECT_EQ(percentile(v, 0.99), 99);
  EXPECT_EQ(percentile(v, 1.0), 100);
  EXPECT_EQ(percentile({}, 0.5), 0);
}

// The stamps cross hosts as ages: a host whose clock is 45 s ahead (it booted 45 s earlier), whose
// failover signal came 30 ms before the agreement, wins over an older one of this host's and lands
// 30 ms before this host's `now`; no stamp stays none; a stamp after `now` is age 0.
TEST(FaultTimeline, StampsCrossHostsAsAges) {
  const uint64_t here = 100'000 * kMs, there = here + 45'000 * kMs;
  const uint64_t mine = stampAsAge(here - 500 * kMs, here), theirs = stampAsAge(there - 30 * kMs, there);
  EXPECT_EQ(stampFromAge(std::max(mine, theirs), here), here - 30 * kMs);
  EXPECT_EQ(stampFromAge(std::max(mine, stampAsAge(0, there)), here), here - 500 * kMs);
  EXPECT_EQ(stampAsAge(0, here), 0u);
  EXPECT_EQ(stampFromAge(0, here), 0u);
  EXPECT_EQ(stampFromAge(stampAsAge(here + 1, here), here), here);
  // Older than this host's boot: its earliest moment, never 0 (none) or a wrap.
  EXPECT_EQ(stampFromAge(stampAsAge(1, there), 10 * kMs), 1u);
}

}  // namespace
