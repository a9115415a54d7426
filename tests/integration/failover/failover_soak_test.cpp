// The mixed-fault soak (ctest label `soak`): 3 hosts x 2 rails of tap NICs, 2 ranks per host
// (6 ranks), every collective in turn, every result checked bit for bit by the worker, under a
// seeded plan of host- and switch-side link faults, tap carrier drops (short and held), flap
// bursts and gray loss, never leaving a pair of hosts without a rail (soak_plan.h), plus rank
// kills after which every other rank must error within RECCL_STALL_TIMEOUT_MS +
// RECCL_FAILOVER_TIMEOUT_MS and the job starts again (soak_runner.h). Separately, every rail of a
// host pulled on purpose: every rank must error within the same bound. The plan runs twice: with
// the default route, and with every rank's route forced to relay.
//
//   build/bin/failover_soak_test --faults 10000 --seed 7 [--kill-every 100] [--log soak.jsonl]
//   RECCL_SOAK_FAULTS=10000 RECCL_SOAK_SEED=7 build/bin/failover_soak_test
//   ctest --test-dir build -L soak      # the CI size: 80 faults, a kill every 40 on average
//
// Arguments win over the environment (RECCL_SOAK_FAULTS, RECCL_SOAK_SEED, RECCL_SOAK_KILL_EVERY,
// RECCL_SOAK_LOG). A failure names its seed and the command that replays the same plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "failover_job.h"
#include "soak_runner.h"
#include "testbed_fixture.h"

namespace {

using reccl::test::NicKind;
using reccl::test::TestbedTest;
using namespace reccl::test::soak;

struct SoakArgs {
  uint64_t seed = 20261202;
  int faults = 80;
  int killEvery = 40;
  std::string log;
};
SoakArgs gArgs;

using MixedFaultSoak = TestbedTest<3, 2, NicKind::kTap>;

SoakOptions soakOptions() {
  SoakOptions o;
  o.shape.hosts = 3;
  o.shape.rails = 2;
  o.shape.ranksPerHost = 2;
  o.shape.tapNics = true;
  o.spec.seed = gArgs.seed;
  o.spec.faults = gArgs.faults;
  o.spec.killEvery = gArgs.killEvery;
  o.logPath = gArgs.log;
  o.replay = "failover_soak_test --seed " + std::to_string(gArgs.seed) + " --faults " + std::to_string(gArgs.faults) +
             " --kill-every " + std::to_string(gArgs.killEvery);
  return o;
}

TEST_F(MixedFaultSoak, SeededLinkCarrierFlapGrayFaultsAndRankKillsAllResultsExact) {
  SoakReport r = runSoak(testbed().state(), soakOptions());
  printf("soak seed %llu: %s\n", static_cast<unsigned long long>(gArgs.seed), r.summary().c_str());
  ASSERT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.faultsPlayed, gArgs.faults);
  EXPECT_GE(r.failovers, 1u) << "no fault was acted on: the faults did not reach the ranks";
  if (gArgs.killEvery > 0 && gArgs.faults >= gArgs.killEvery * 3 / 2) {
    EXPECT_GE(r.kills.size(), 1u) << "the plan kills at least once in 1.5 x --kill-every faults";
  }
}

// The same plan with every rank's route forced to relay: a rank whose own NIC fails forwards
// through the other rank of its host, so the relay pipes and servers, and the moves between
// relayed and direct paths, meet every fault kind (docs/results/soak.md, "Relay route").
TEST_F(MixedFaultSoak, RelayRouteSeededFaultsAndRankKillsAllResultsExact) {
  SoakOptions o = soakOptions();
  o.workerEnv = "RECCL_FAILOVER_ROUTE=relay";
  o.replay += " --gtest_filter='MixedFaultSoak.RelayRoute*'";
  SoakReport r = runSoak(testbed().state(), o);
  printf("relay-route soak seed %llu: %s\n", static_cast<unsigned long long>(gArgs.seed), r.summary().c_str());
  ASSERT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.faultsPlayed, gArgs.faults);
  EXPECT_GE(r.failovers, 1u) << "no fault was acted on: the faults did not reach the ranks";
  EXPECT_GE(r.relayedMoves, 1) << "no connection was moved onto a relay";
}

// Every rail of one host pulled on purpose, by each kind of hard fault: no pair of hosts with that
// host has a rail left, so every rank must error within the bound (and none hangs).
class AllRailsOfAHostDown : public MixedFaultSoak, public ::testing::WithParamInterface<FaultKind> {};

TEST_P(AllRailsOfAHostDown, EveryRankErrorsWithinTheBound) {
  SoakReport r = runAllRailsDown(testbed().state(), soakOptions(), GetParam(), 1);
  ASSERT_EQ(r.kills.size(), 1u) << r.failure;
  std::string times;
  for (double ms : r.kills[0].errorMs) times += " " + std::to_string(static_cast<int>(ms));
  printf("every rail of host 1 down (%s): ranks errored after%s ms (bound %d ms)\n", faultKindName(GetParam()),
         times.c_str(), SoakDeadlines{}.killBoundMs());
  EXPECT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.kills[0].errorMs.size(), 6u);
}

INSTANTIATE_TEST_SUITE_P(Kinds, AllRailsOfAHostDown,
                         ::testing::Values(FaultKind::kHostLink, FaultKind::kSwitchLink, FaultKind::kCarrierHeld),
                         [](const ::testing::TestParamInfo<FaultKind>& param) {
                           std::string n = faultKindName(param.param);
                           n.erase(std::remove(n.begin(), n.end(), '-'), n.end());
                           return n;
                         });

void printUsage(FILE* to) {
  fprintf(to,
          "usage: failover_soak_test [gtest flags] [--faults N] [--seed S] [--kill-every N] [--log FILE]\n"
          "  --faults N      link/carrier/flap/gray faults to play (RECCL_SOAK_FAULTS, default 80)\n"
          "  --seed S        the plan's seed (RECCL_SOAK_SEED, default 20261202)\n"
          "  --kill-every N  SIGKILL a rank after every N faults on average, 0: never (RECCL_SOAK_KILL_EVERY, 40)\n"
          "  --log FILE      one JSON line per event; on failure the job's output beside it (RECCL_SOAK_LOG)\n"
          "example: failover_soak_test --faults 10000 --seed 7 --kill-every 100 --log soak.jsonl\n");
}

// ---- connections made while a fault is on -------------------------------------------------------
//
// Connections are made lazily: the ring's at communicator init, the others by the first call of
// the collective that needs them (here the first all-to-all, every pair). The soak lets every rank
// warm up first (SoakOptions::warmupIters); these are the faults in that window:
// - a rail down at one host while connections toward it are made (init, or a first call) is
//   survivable, rail 1 being up everywhere: a dial unanswered for the stall time gives way to the
//   next rail (Comm::dialData), and the job runs to its end;
// - with every rail of a host down, a call blocked in such a dial returns within the same bound
//   as any other (the dial ends when the communicator or any of its ports fails), not at
//   RECCL_TIMEOUT_MS.
class ConnectionsMadeDuringAFault : public MixedFaultSoak {
 protected:
  static std::string pullRail0OfHost0(bool down) {
    std::string cmd = std::string(RECCL_CLI_PATH) + " inject " + (down ? "link-down" : "link-up") + " --netns " +
                      fabricNetns() + " --dev h0r0 >/dev/null";
    return system(cmd.c_str()) == 0 ? "" : cmd;
  }
  // The job: every rank waits `startDelayMs` after connecting, then runs `coll` 70 times; the
  // fault is pulled before init (`beforeInit`) or once every rank has connected.
  void expectRail0DownAtHost0Survived(bool beforeInit, const std::string& coll, int startDelayMs) {
    if (beforeInit) {
      ASSERT_EQ(pullRail0OfHost0(true), "");
    }
    reccl::test::failover::Job j(testbed().name(),
                                 "RECCL_TIMEOUT_MS=20000 RECCL_STALL_TIMEOUT_MS=1000 RECCL_FAILOVER_TIMEOUT_MS=3000 "
                                 "RECCL_HOLDDOWN_MS=300 WORKER_COUNT=65536 WORKER_ITERS=70 WORKER_COLL=" +
                                     coll + " WORKER_START_DELAY_MS=" + std::to_string(startDelayMs),
                                 120, 2);
    bool started = beforeInit || j.waitFor("started rank", 6, std::chrono::seconds(60));
    std::string pulled = beforeInit || !started ? "" : pullRail0OfHost0(true);
    int code = j.wait();
    std::string back = pullRail0OfHost0(false);
    std::string t = j.text();
    ASSERT_TRUE(started) << t;
    EXPECT_EQ(pulled, "");
    EXPECT_EQ(back, "");
    EXPECT_EQ(code, 0) << t;
    EXPECT_EQ(reccl::test::failover::countMatches(t, "done rank [0-9]+ iters 70 "), 6) << t;
  }
};

TEST_F(ConnectionsMadeDuringAFault, ARailDownAtOneHostAtInitIsRoutedAround) {
  expectRail0DownAtHost0Survived(true, "all", 0);
}

TEST_F(ConnectionsMadeDuringAFault, ARailDownAtOneHostBeforeTheFirstAllToAllIsRoutedAround) {
  expectRail0DownAtHost0Survived(false, "alltoall", 2000);
}

TEST_F(ConnectionsMadeDuringAFault, EveryRailOfAHostDownBeforeTheFirstAllToAllErrorsEveryRankInTime) {
  SoakOptions o = soakOptions();
  o.warmupIters = 0;  // pulled as soon as every rank has connected, while they wait 2 s
  o.workerEnv = "WORKER_COLL=alltoall WORKER_START_DELAY_MS=2000";
  SoakReport r = runAllRailsDown(testbed().state(), o, FaultKind::kSwitchLink, 1);
  ASSERT_EQ(r.kills.size(), 1u) << r.failure;
  EXPECT_TRUE(r.ok) << r.failure;
}

int usage(const std::string& why) {
  fprintf(stderr, "failover_soak_test: %s\n", why.c_str());
  printUsage(stderr);
  return 64;
}

// A whole non-negative number, or -1.
long long number(const char* s) {
  char* end = nullptr;
  long long v = s && *s ? strtoll(s, &end, 10) : -1;
  return end && *end == '\0' && v >= 0 ? v : -1;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);  // takes the --gtest_* flags out of argv
  auto take = [](const char* env, long long* into, const char* name) {
    if (const char* v = getenv(env)) {
      *into = number(v);
      if (*into < 0) {
        fprintf(stderr, "failover_soak_test: %s=%s: not a whole number >= 0 (%s)\n", env, v, name);
        return false;
      }
    }
    return true;
  };
  long long seed = static_cast<long long>(gArgs.seed), faults = gArgs.faults, kill = gArgs.killEvery;
  if (!take("RECCL_SOAK_SEED", &seed, "seed") || !take("RECCL_SOAK_FAULTS", &faults, "faults") ||
      !take("RECCL_SOAK_KILL_EVERY", &kill, "kill-every"))
    return 64;
  if (const char* v = getenv("RECCL_SOAK_LOG")) gArgs.log = v;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      printUsage(stdout);
      return 0;
    }
    if (i + 1 >= argc) return usage("missing value after " + a);
    const char* v = argv[++i];
    long long* into = a == "--seed" ? &seed : a == "--faults" ? &faults : a == "--kill-every" ? &kill : nullptr;
    if (a == "--log") {
      gArgs.log = v;
    } else if (!into) {
      return usage("unknown argument " + a);
    } else if ((*into = number(v)) < 0) {
      return usage(a + " " + v + ": not a whole number >= 0");
    }
  }
  if (faults < 1 || faults > 10000000) return usage("--faults: 1 to 10000000");
  gArgs.seed = static_cast<uint64_t>(seed);
  gArgs.faults = static_cast<int>(faults);
  gArgs.killEvery = static_cast<int>(std::min(kill, 1000000LL));
  return RUN_ALL_TESTS();
}
