// The soak's plan (soak_plan.h): a function of the seed, phases on one rail, kills where asked,
// every kind in its documented range.
#include "soak_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace {

using namespace reccl::test::soak;

SoakShape tapShape() { return SoakShape{3, 2, 2, true, {}}; }

bool same(const FaultStep& a, const FaultStep& b) {
  return describe(a) == describe(b) && a.gapMs == b.gapMs && a.lastOfPhase == b.lastOfPhase;
}

TEST(SoakPlan, TheSameSeedGivesTheSamePlanAndAnotherSeedAnother) {
  auto a = planSoak(tapShape(), {7, 500, 50});
  auto b = planSoak(tapShape(), {7, 500, 50});
  auto c = planSoak(tapShape(), {8, 500, 50});
  ASSERT_EQ(a.size(), 500u);
  ASSERT_EQ(b.size(), 500u);
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(same(a[i], b[i])) << describe(a[i]) << " vs " << describe(b[i]);
    differ += !same(a[i], c[i]);
  }
  EXPECT_GT(differ, 400);
}

TEST(SoakPlan, AShorterRunPlaysTheSameFaultsUpToItsFirstKill) {
  auto full = planSoak(tapShape(), {9, 400, 40});
  auto part = planSoak(tapShape(), {9, 30, 40});
  auto noKills = planSoak(tapShape(), {9, 400, 0});
  size_t firstKill = 0;
  while (full[firstKill].killRank < 0) ++firstKill;
  for (size_t i = 0; i < part.size(); ++i) {
    EXPECT_EQ(describe(part[i]), describe(full[i]));
    EXPECT_EQ(part[i].gapMs, full[i].gapMs);
  }
  for (size_t i = 0; i < firstKill; ++i) EXPECT_TRUE(same(full[i], noKills[i])) << i;
  // After a kill only the phases differ: kinds, hosts and durations stay.
  for (size_t i = 0; i < full.size(); ++i) {
    EXPECT_EQ(full[i].kind, noKills[i].kind);
    EXPECT_EQ(full[i].host, noKills[i].host);
    EXPECT_EQ(full[i].durationMs, noKills[i].durationMs);
  }
}

TEST(SoakPlan, EveryPhaseStaysOnOneRailAndEndsWithADrainOrAKill) {
  for (uint64_t seed : {1u, 2u, 3u, 20261202u}) {
    auto plan = planSoak(tapShape(), {seed, 2000, 60});
    int phaseRail = -1, phaseLen = 0;
    std::set<int> railsUsed;
    for (const FaultStep& s : plan) {
      if (phaseRail < 0) phaseRail = s.rail;
      EXPECT_EQ(s.rail, phaseRail) << "seed " << seed << ": " << describe(s);
      ++phaseLen;
      railsUsed.insert(s.rail);
      if (s.killRank >= 0) {
        EXPECT_TRUE(s.lastOfPhase) << "a kill ends the phase: " << describe(s);
      }
      if (s.lastOfPhase) {
        EXPECT_LE(phaseLen, 10);
        phaseRail = -1;
        phaseLen = 0;
      }
    }
    EXPECT_TRUE(plan.back().lastOfPhase);
    EXPECT_EQ(railsUsed, (std::set<int>{0, 1})) << "seed " << seed;
  }
}

TEST(SoakPlan, KillsComeEveryKillEveryFaultsOnAverageAndNeverWithoutIt) {
  auto plan = planSoak(tapShape(), {11, 10000, 100});
  int last = 0, kills = 0;
  std::set<int> ranks;
  int whileFaulted = 0;
  for (const FaultStep& s : plan) {
    if (s.killRank < 0) continue;
    int gap = s.index + 1 - last;
    EXPECT_GE(gap, 50);
    EXPECT_LE(gap, 150);
    last = s.index + 1;
    ++kills;
    ranks.insert(s.killRank);
    whileFaulted += s.killWhileFaulted;
    EXPECT_GE(s.killRank, 0);
    EXPECT_LT(s.killRank, 6);
  }
  EXPECT_GE(kills, 80);
  EXPECT_LE(kills, 120);
  EXPECT_EQ(ranks.size(), 6u) << "every rank is killed some time";
  EXPECT_GT(whileFaulted, kills / 4);
  EXPECT_LT(whileFaulted, kills * 3 / 4);
  for (const FaultStep& s : planSoak(tapShape(), {11, 2000, 0})) EXPECT_EQ(s.killRank, -1);
}

TEST(SoakPlan, EveryKindComesInItsRange) {
  auto plan = planSoak(tapShape(), {5, 6000, 0});
  int perKind[kNumFaultKinds] = {};
  std::set<int> hosts;
  std::set<FlapVia> via;
  for (const FaultStep& s : plan) {
    ++perKind[static_cast<int>(s.kind)];
    hosts.insert(s.host);
    auto in = [&](double v, double lo, double hi, const char* what) {
      EXPECT_TRUE(v >= lo && v <= hi) << describe(s) << ": " << what << " " << v << " not in [" << lo << ", " << hi
                                      << "]";
    };
    in(s.gapMs, 20, 300, "gap");
    // Each kind's duration range (ms), as soak_plan.h documents it.
    static const std::map<FaultKind, std::pair<int, int>> durations = {
        {FaultKind::kHostLink, {100, 1500}},   {FaultKind::kSwitchLink, {100, 1500}},
        {FaultKind::kCarrierShort, {50, 300}}, {FaultKind::kCarrierHeld, {1000, 3000}},
        {FaultKind::kFlap, {20, 200}},         {FaultKind::kGray, {1000, 4000}}};
    in(s.durationMs, durations.at(s.kind).first, durations.at(s.kind).second, "duration");
    if (s.kind == FaultKind::kFlap) {
      in(s.flapCycles, 2, 5, "cycles");
      in(s.flapPeriodMs, 10, 40, "period");
      EXPECT_EQ(s.durationMs, s.flapCycles * s.flapPeriodMs);
      via.insert(s.flapVia);
    }
    if (s.kind == FaultKind::kGray) in(s.dropRate, 0.01, 0.05, "drop rate");
  }
  for (int k = 0; k < kNumFaultKinds; ++k) {
    EXPECT_GT(perKind[k], 800) << faultKindName(static_cast<FaultKind>(k));
    EXPECT_LT(perKind[k], 1200) << faultKindName(static_cast<FaultKind>(k));
  }
  EXPECT_EQ(hosts, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(via.size(), 3u);
}

TEST(SoakPlan, VethNicsGetNoCarrierFaultsAndAGivenKindListIsKept) {
  SoakShape veth{2, 2, 1, false, {}};
  for (const FaultStep& s : planSoak(veth, {3, 3000, 0})) {
    EXPECT_NE(s.kind, FaultKind::kCarrierShort);
    EXPECT_NE(s.kind, FaultKind::kCarrierHeld);
    if (s.kind == FaultKind::kFlap) {
      EXPECT_NE(s.flapVia, FlapVia::kCarrier);
    }
    EXPECT_LT(s.host, 2);
  }
  SoakShape links{2, 2, 1, false, {FaultKind::kSwitchLink, FaultKind::kFlap}};
  std::set<FaultKind> seen;
  for (const FaultStep& s : planSoak(links, {3, 500, 0})) seen.insert(s.kind);
  EXPECT_EQ(seen, (std::set<FaultKind>{FaultKind::kSwitchLink, FaultKind::kFlap}));
}

TEST(SoakPlan, BadShapesAndSpecsAreRefusedNamingTheField) {
  EXPECT_EQ(checkSoak(tapShape(), {1, 10, 0}), "");
  EXPECT_NE(checkSoak({1, 2, 1, true, {}}, {1, 10, 0}).find("hosts"), std::string::npos);
  EXPECT_NE(checkSoak({3, 1, 1, true, {}}, {1, 10, 0}).find("rails"), std::string::npos);
  EXPECT_NE(checkSoak({3, 2, 0, true, {}}, {1, 10, 0}).find("ranks per host"), std::string::npos);
  EXPECT_NE(checkSoak(tapShape(), {1, 0, 0}).find("faults"), std::string::npos);
  EXPECT_NE(checkSoak(tapShape(), {1, 10, -1}).find("kill-every"), std::string::npos);
  EXPECT_NE(checkSoak({3, 2, 1, false, {FaultKind::kCarrierHeld}}, {1, 10, 0}).find("tap"), std::string::npos);
}

TEST(SoakPlan, DescribeNamesTheFaultAndTheKill) {
  FaultStep s;
  s.index = 12;
  s.kind = FaultKind::kFlap;
  s.host = 1;
  s.rail = 0;
  s.flapCycles = 3;
  s.flapPeriodMs = 20;
  s.durationMs = 60;
  s.flapVia = FlapVia::kCarrier;
  s.killRank = 4;
  s.killWhileFaulted = true;
  EXPECT_EQ(describe(s), "#12 flap h1 rail0 60 ms (3 cycles of 20 ms, carrier), then kill rank 4 while faulted");
}

}  // namespace
