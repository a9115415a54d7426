// Collectives across testbed hosts: ranks are processes started by `reccl testbed run` in their
// host's network namespace (torchrun-style environment), several hosts and several ranks per
// host (shared memory inside a host, rail sockets between hosts). Results checked bit for bit
// by the worker (the same matrix as the ranks-as-threads test).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <set>
#include <string>

#include "testbed_fixture.h"

namespace {

struct Output {
  int code = -1;
  std::string text;
  double seconds = 0;
};

Output launch(const std::string& name, int ranksPerHost, const std::string& env, int timeoutSec) {
  std::string cmd = std::string(RECCL_CLI_PATH) + " testbed run --name " + name +
                    " --ranks-per-host " + std::to_string(ranksPerHost) + " --timeout " +
                    std::to_string(timeoutSec) + " -- /usr/bin/env " + env + " " + RECCL_TEST_WORKER_PATH + " 2>&1";
  Output out;
  auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (fgets(buf, sizeof(buf), p)) out.text += buf;
  int st = pclose(p);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

int countMatches(const std::string& text, const std::string& re) {
  std::regex r(re);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), r), std::sregex_iterator()));
}

class TwoHostsTwoRails : public reccl::test::TestbedTest<2, 2> {};

// The 8-rank matrices: counts 0, 1, 7 (edge and odd), 1003 (not a multiple of the rank count,
// several steps per rank with 16 KiB chunks) and 65539 (prime, above the 64 KiB small-message
// bound for 4-byte types: ring instead of recursive doubling), every type and op, then the
// worker's 1M+3 subset; ~20-30 s each with 2 cores under a load of 11.
constexpr const char* kEightRankMatrix =
    "WORKER_MATRIX=1 WORKER_COUNTS=0,1,7,1003,65539 RECCL_CHUNK_SIZE=16K RECCL_TIMEOUT_MS=30000";

TEST_F(TwoHostsTwoRails, MatrixOneRankPerHostOverBothRails) {
  auto o = launch(testbed().name(), 1, "WORKER_MATRIX=1 RECCL_TIMEOUT_MS=20000", 240);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(countMatches(o.text, "matrix ok rank"), 2) << o.text;
}

TEST_F(TwoHostsTwoRails, MatrixTwoRanksPerHostShmAndSockets) {
  auto o = launch(testbed().name(), 2, "WORKER_MATRIX=1 RECCL_TIMEOUT_MS=20000", 240);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(countMatches(o.text, "matrix ok rank"), 4) << o.text;
}

// Ranks that ask for different channel threads (RECCL_CHANNEL_THREADS per rank: 1, 3, 2, 1) all run
// the smallest, one thread that takes channel 0, then 1, then 2, and every result is exact.
// Three channels over two rails: two of them share a rail.
TEST_F(TwoHostsTwoRails, MatrixWithChannelThreadsAgreedAcrossRanks) {
  auto o = launch(testbed().name(), 2,
                  "WORKER_MATRIX=1 WORKER_COUNTS=0,7,65539 WORKER_CHANNEL_THREADS=1,3,2,1 RECCL_NCHANNELS=3 "
                  "RECCL_SHM_DISABLE=1 RECCL_DEBUG=INFO RECCL_DEBUG_SUBSYS=INIT RECCL_TIMEOUT_MS=20000",
                  240);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(countMatches(o.text, "matrix ok rank"), 4) << o.text;
  EXPECT_EQ(countMatches(o.text, "3 channels on 1 thread"), 4) << o.text;
  EXPECT_EQ(countMatches(o.text, "asks for 3"), 1) << o.text;
}

TEST_F(TwoHostsTwoRails, RankKilledMidCollectiveFailsTheOthersInTime) {
  // Rank 1 (host 0, second rank) dies at iteration 3; everyone else is inside an allreduce then.
  auto o = launch(testbed().name(), 
      2, "WORKER_ITERS=1000 WORKER_COUNT=2000000 WORKER_DIE_RANK=1 WORKER_DIE_ITER=3 RECCL_TIMEOUT_MS=3000", 60);
  EXPECT_NE(o.code, 0) << o.text;
  EXPECT_LT(o.seconds, 20.0) << o.text;
  std::set<int> failed;
  std::regex r("worker rank ([0-9]+) iteration [0-9]+: (remote process exited|timeout|network error)");
  for (auto it = std::sregex_iterator(o.text.begin(), o.text.end(), r); it != std::sregex_iterator(); ++it)
    failed.insert(std::stoi((*it)[1]));
  EXPECT_EQ(failed, (std::set<int>{0, 2, 3})) << o.text;
}

// The same death, and the survivors go on as NCCL's do: recclCommShrink without rank 1
// (RECCL_SHRINK_ABORT), its handover dialled across the rails from host 0 (the leader, rank 0) to
// host 1, then 20 checked allreduces on the 3-rank child (shared memory inside host 1, rails
// between the hosts).
TEST_F(TwoHostsTwoRails, SurvivorsOfAKilledRankShrinkAndGoOn) {
  auto o = launch(testbed().name(), 2,
                  "WORKER_ITERS=20 WORKER_COUNT=100003 WORKER_DIE_RANK=1 WORKER_DIE_ITER=3 WORKER_SHRINK=1 "
                  "RECCL_TIMEOUT_MS=3000",
                  60);
  EXPECT_NE(o.code, 0) << "rank 1 is SIGKILLed: the run's status is its\n" << o.text;
  EXPECT_LT(o.seconds, 20.0) << o.text;
  EXPECT_EQ(countMatches(o.text, "shrunk rank 0 of 3 \\(was 0\\)"), 1) << o.text;
  EXPECT_EQ(countMatches(o.text, "shrunk rank 1 of 3 \\(was 2\\)"), 1) << o.text;
  EXPECT_EQ(countMatches(o.text, "shrunk rank 2 of 3 \\(was 3\\)"), 1) << o.text;
  EXPECT_EQ(countMatches(o.text, "wrong result|recclCommShrink:"), 0) << o.text;
}

TEST_F(TwoHostsTwoRails, MatrixFourRanksPerHost) {
  // 8 ranks, 4 per host: shm rings inside a host, local ranks 0-3 on rails 0,1,0,1 between hosts.
  auto o = launch(testbed().name(), 4, kEightRankMatrix, 300);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(countMatches(o.text, "matrix ok rank"), 8) << o.text;
  std::printf("2 hosts x 4 ranks: %.1f s\n", o.seconds);
}

TEST_F(TwoHostsTwoRails, ConcurrentCommunicatorsAcrossHosts) {
  // Every rank holds two communicators and runs a matrix on each at the same time.
  auto o = launch(testbed().name(), 2, "WORKER_MATRIX=1 WORKER_COMMS=2 RECCL_TIMEOUT_MS=30000", 300);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(countMatches(o.text, "concurrent ok rank"), 4) << o.text;
}

class FourHostsTwoRails : public reccl::test::TestbedTest<4, 2> {};

TEST_F(FourHostsTwoRails, MatrixTwoRanksPerHost) {
  // 8 ranks over 4 hosts: per lap the ring crosses between hosts four times (rails) and stays
  // inside a host four times (shm).
  auto o = launch(testbed().name(), 2, kEightRankMatrix, 300);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(countMatches(o.text, "matrix ok rank"), 8) << o.text;
  std::printf("4 hosts x 2 ranks: %.1f s\n", o.seconds);
}

class ThreeHostsOneRail : public reccl::test::TestbedTest<3, 1> {};

TEST_F(ThreeHostsOneRail, MatrixOddRankCount) {
  auto o = launch(testbed().name(), 1, "WORKER_MATRIX=1 RECCL_TIMEOUT_MS=20000", 240);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(countMatches(o.text, "matrix ok rank"), 3) << o.text;
}

}  // namespace
