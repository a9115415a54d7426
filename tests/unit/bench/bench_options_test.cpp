// reccl-bench's flags: nccl-tests' spellings and defaults, size suffixes, lists, and a usage
// error naming the argument for every bad value.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "bench_options.h"
#include "reduce/reduce.h"

namespace reccl::bench {
namespace {

Result<BenchOptions> parse(std::initializer_list<const char*> args, const char* prog = "reccl-bench") {
  std::vector<const char*> v{prog};
  v.insert(v.end(), args.begin(), args.end());
  return parseOptions(int(v.size()), v.data());
}

TEST(BenchOptions, DefaultsMatchNcclTests) {
  auto o = parse({});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->minBytes, 32 << 20);
  EXPECT_EQ(o->maxBytes, 32 << 20);
  EXPECT_EQ(o->iters, 20);
  EXPECT_EQ(o->warmupIters, 5);
  EXPECT_TRUE(o->check);
  EXPECT_EQ(o->checkIters, 1);
  EXPECT_EQ(o->root, 0);
  EXPECT_EQ(o->threads, 1);
  EXPECT_EQ(o->gpus, 1);
  EXPECT_EQ(o->aggIters, 1);
  EXPECT_EQ(o->runCycles, 1);
  EXPECT_EQ(o->average, 1);  // the mean over ranks, as nccl-tests
  EXPECT_EQ(o->blocking, 0);
  EXPECT_TRUE(o->notes.empty());
  ASSERT_EQ(o->colls.size(), 1u);
  EXPECT_EQ(o->colls[0], Coll::kAllReduce);
  ASSERT_EQ(o->types.size(), 1u);
  EXPECT_EQ(o->types[0], recclFloat32);
  EXPECT_EQ(o->ops[0], recclSum);
}

TEST(BenchOptions, NcclTestsFlags) {
  auto o = parse({"-b", "8", "-e", "128M", "-f", "2", "-n", "7", "-w", "2", "-c", "0", "-d", "half", "-o", "max",
                  "-r", "1", "-z", "1", "-t", "4", "--json", "x.json", "--coll", "reduce_scatter"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->minBytes, 8);
  EXPECT_EQ(o->maxBytes, 128 << 20);
  EXPECT_EQ(o->stepFactor, 2.0);
  EXPECT_EQ(o->iters, 7);
  EXPECT_EQ(o->warmupIters, 2);
  EXPECT_FALSE(o->check);
  EXPECT_EQ(o->types[0], recclFloat16);
  EXPECT_EQ(o->ops[0], recclMax);
  EXPECT_EQ(o->root, 1);
  EXPECT_EQ(o->blocking, 1);
  EXPECT_EQ(o->threads, 4);
  EXPECT_EQ(o->jsonPath, "x.json");
  EXPECT_EQ(o->colls[0], Coll::kReduceScatter);
}

TEST(BenchOptions, EveryNcclTestsFlagIsAccepted) {
  auto o = parse({"--nthreads", "2", "--ngpus", "3", "--agg_iters", "4", "--run_cycles", "0", "--parallel_init", "1",
                  "--check", "5", "--average", "3", "--report_cputime", "1", "--report_timestamps", "1", "--unalign",
                  "7", "--per_iter_timing", "1", "--per_iter_skip", "2", "--timeout", "30", "--output_file", "o.json",
                  "--cudagraph", "0", "--local_register", "2", "--stream_null", "1", "--cta_policy", "0",
                  "--device_implementation", "0", "--device_cta_count", "16", "--memory", "1", "-r", "all"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->threads, 2);
  EXPECT_EQ(o->gpus, 3);
  EXPECT_EQ(o->ranksHere(), 6);
  EXPECT_EQ(o->aggIters, 4);
  EXPECT_EQ(o->runCycles, 0);
  EXPECT_EQ(o->checkIters, 5);
  EXPECT_EQ(o->average, 3);
  EXPECT_TRUE(o->reportCputime);
  EXPECT_TRUE(o->reportTimestamps);
  EXPECT_EQ(o->unalign, 7);
  EXPECT_TRUE(o->perIterTiming);
  EXPECT_EQ(o->perIterSkip, 2);
  EXPECT_EQ(o->timeoutSec, 30);
  EXPECT_EQ(o->outputFile, "o.json");
  EXPECT_EQ(o->root, -1);
  EXPECT_EQ(o->localRegister, 2);
  // -R 2 (symmetric windows) needs no note; the GPU-only flags given a value other than 0 are
  // noted, by name.
  ASSERT_EQ(o->notes.size(), 3u);
  EXPECT_NE(o->notes[0].find("-y,--stream_null 1"), std::string::npos) << o->notes[0];
  EXPECT_NE(o->notes[1].find("-V,--device_cta_count 16"), std::string::npos) << o->notes[1];
  EXPECT_NE(o->notes[2].find("-M,--memory 1"), std::string::npos) << o->notes[2];
}

TEST(BenchOptions, LauncherWorldSizeFromTheLaunchersVariables) {
  auto size = [](std::map<std::string, std::string> m) {
    return launcherWorldSize([&m](const char* n) -> const char* {
      auto it = m.find(n);
      return it == m.end() ? nullptr : it->second.c_str();
    });
  };
  EXPECT_EQ(size({}), 0);
  EXPECT_EQ(size({{"WORLD_SIZE", "4"}}), 0);  // no rank: not a launcher's process
  EXPECT_EQ(size({{"RANK", "1"}, {"WORLD_SIZE", "4"}}), 4);
  EXPECT_EQ(size({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}), 2);
  EXPECT_EQ(size({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}}), 8);
  EXPECT_EQ(size({{"PMI_RANK", "0"}}), 1);
}

TEST(BenchOptions, LongFlagsAndAllLists) {
  auto o = parse({"--minbytes", "1K", "--maxbytes", "1G", "--stepbytes", "4K", "--datatype", "all", "--op", "all",
                  "--coll", "all", "--root", "-1"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->minBytes, 1024);
  EXPECT_EQ(o->maxBytes, 1LL << 30);
  EXPECT_EQ(o->stepBytes, 4096);
  EXPECT_EQ(o->types.size(), size_t(recclNumTypes));
  EXPECT_EQ(o->ops.size(), size_t(recclNumOps) + 1);  // and mulsum, last
  EXPECT_EQ(o->ops.back(), reduce::kPreMulSum);
  EXPECT_EQ(o->colls.size(), 9u);
  EXPECT_EQ(o->root, -1);
  auto l = parse({"-d", "bf16,int8", "-o", "sum,avg", "--coll", "allgather,sendrecv"});
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->types, (std::vector<recclDataType_t>{recclBfloat16, recclInt8}));
  EXPECT_EQ(l->ops, (std::vector<recclRedOp_t>{recclSum, recclAvg}));
  auto m = parse({"-o", "mulsum"});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->ops, (std::vector<recclRedOp_t>{reduce::kPreMulSum}));
  EXPECT_STREQ(opName(m->ops[0]), "mulsum");
  EXPECT_EQ(l->colls, (std::vector<Coll>{Coll::kAllGather, Coll::kSendRecv}));
}

TEST(BenchOptions, ProgramNameSelectsCollectiveLikeNcclTests) {
  auto o = parse({}, "/usr/bin/all_gather_perf");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->colls[0], Coll::kAllGather);
  auto p = parse({"--coll", "broadcast"}, "all_gather_perf");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->colls[0], Coll::kBroadcast);
}

TEST(BenchOptions, BadValuesNameTheArgument) {
  struct Case {
    std::vector<const char*> args;
    const char* mentions;
  };
  const std::vector<Case> cases = {
      {{"-b", "12Q"}, "-b/--minbytes"},
      {{"-b", "1M", "-e", "1K"}, "-e/--maxbytes"},
      {{"-f", "1"}, "-f/--stepfactor"},
      {{"-f", "inf"}, "-f/--stepfactor"},
      {{"-f", "nan"}, "-f/--stepfactor"},
      {{"-n", "0"}, "-n/--iters"},
      {{"-w", "-1"}, "-w/--warmup_iters"},
      {{"-c", "-1"}, "-c/--check"},
      {{"-z", "5"}, "-z/--blocking"},
      {{"-a", "4"}, "-a/--average"},
      {{"-m", "0"}, "-m/--agg_iters"},
      {{"-g", "0"}, "-g/--ngpus"},
      {{"-K", "1"}, "-K/--per_iter_skip"},
      {{"-I", "1", "-n", "2", "-K", "2"}, "-K/--per_iter_skip"},
      {{"-J", "out.txt"}, "-J/--output_file"},
      {{"-d", "f8e5m2"}, "not a reccl type"},
      {{"-r", "first"}, "-r/--root"},
      {{"-d", "float128"}, "-d/--datatype"},
      {{"-o", "xor"}, "-o/--op"},
      {{"-r", "-2"}, "-r/--root"},
      {{"-t", "-3"}, "-t/--nthreads"},
      {{"-t", "0"}, "-t/--nthreads"},
      {{"--coll", "allshuffle"}, "--coll"},
      {{"-n", "abc"}, "iters"},
      {{"--frobnicate"}, "frobnicate"},
      {{"--fault-background", "tb-h1/rail2"}, "--fault-background: needs --fault-plan"},
      {{"--fault-hold-tap-queues"}, "--fault-hold-tap-queues: needs --fault-plan"},
      {{"--fault-plan-every-rank"}, "--fault-plan-every-rank: needs --fault-plan"},
      {{"--fault-plan", "p.json", "--fault-background", "rail2"}, "--fault-background: NETNS/DEV"},
      {{"--fault-plan", "p.json", "--fault-background", "tb-h1/"}, "--fault-background: NETNS/DEV"},
  };
  for (const Case& c : cases) {
    std::vector<const char*> v{"reccl-bench"};
    v.insert(v.end(), c.args.begin(), c.args.end());
    auto o = parseOptions(int(v.size()), v.data());
    ASSERT_FALSE(o.ok()) << c.mentions;
    EXPECT_NE(o.status().message().find(c.mentions), std::string::npos) << o.status().message();
  }
}

TEST(BenchOptions, FaultBackgroundDevicesAreKept) {
  auto o = parse({"--fault-plan", "p.json", "--fault-background", "tb-h1/rail2", "--fault-background", "tb-fab/h1r2"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->faultBackground, (std::vector<std::string>{"tb-h1/rail2", "tb-fab/h1r2"}));
  EXPECT_FALSE(o->faultHoldTapQueues);
  auto h = parse({"--fault-plan", "p.json", "--fault-hold-tap-queues"});
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_TRUE(h->faultHoldTapQueues);
}

TEST(BenchOptions, HelpDoesNotExit) {
  auto o = parse({"-h"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->help);
  EXPECT_NE(o->helpText.find("--stepfactor"), std::string::npos);
  EXPECT_NE(o->helpText.find("Examples"), std::string::npos);
}

TEST(BenchOptions, SizeListsGrowByFactorOrStep) {
  BenchOptions o;
  o.minBytes = 8;
  o.maxBytes = 64;
  o.stepFactor = 2;
  EXPECT_EQ(sizeList(o), (std::vector<int64_t>{8, 16, 32, 64}));
  o.stepFactor = 0;
  o.stepBytes = 20;
  EXPECT_EQ(sizeList(o), (std::vector<int64_t>{8, 28, 48}));
  o.minBytes = 0;
  o.maxBytes = 4;
  o.stepFactor = 2;
  EXPECT_EQ(sizeList(o), (std::vector<int64_t>{0, 1, 2, 4}));
  o.minBytes = o.maxBytes = 64 << 20;
  EXPECT_EQ(sizeList(o), (std::vector<int64_t>{64 << 20}));
  // A factor that would carry the size past what int64 holds ends the list at the last size.
  o.minBytes = 1 << 30;
  o.maxBytes = INT64_MAX;
  o.stepFactor = 1e300;
  EXPECT_EQ(sizeList(o), (std::vector<int64_t>{1 << 30}));
}

}  // namespace
}  // namespace reccl::bench
