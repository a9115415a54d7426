// reccl-bench's command line: nccl-tests' flags (-b -e -i -f -n -w -c -d -o -r -z) plus
// --coll, -t/--threads and --json. Parsing never exits or throws: errors come back as a Status
// whose message names the argument.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collective.h"
#include "reccl/common/status.h"
#include "reccl/reccl.h"

namespace reccl::bench {

struct BenchOptions {
  std::vector<Coll> colls{Coll::kAllReduce};
  int64_t minBytes = 32 << 20;
  int64_t maxBytes = 32 << 20;
  int64_t stepBytes = 1 << 20;
  double stepFactor = 0;  // 0: not given, sizes grow by stepBytes
  int iters = 20;
  int warmupIters = 5;
  bool check = true;
  std::vector<recclDataType_t> types{recclFloat32};
  std::vector<recclRedOp_t> ops{recclSum};
  int root = 0;  // -1: every rank in turn
  bool blocking = false;
  int threads = 0;  // >0: that many ranks as threads in this process (recclCommInitAll)
  std::string jsonPath;
  // --fault-plan: one allreduce size in a loop while rank 0 runs this reccl inject plan; the loop
  // lasts the plan plus faultTailMs (and at least `iters` iterations). See fault_loop.h.
  std::string faultPlanPath;
  std::string faultLogPath;  // the plan's JSON-lines log (reccl inject plan --log)
  int64_t faultTailMs = 1000;
  bool help = false;
  std::string helpText;  // filled when help is set
  std::vector<std::string> argv;  // as given, for the JSON record
};

// argv[0] may name the collective as nccl-tests binaries do (all_reduce_perf); --coll wins.
Result<BenchOptions> parseOptions(int argc, const char* const* argv);

// The message sizes of a run: min, then +stepBytes or *stepFactor, up to max inclusive.
std::vector<int64_t> sizeList(const BenchOptions& o);

// "float" / "half" ... (nccl-tests names, also "fp16", "bf16", "f32"), "all"; ops likewise.
Result<std::vector<recclDataType_t>> parseTypes(const std::string& text);
Result<std::vector<recclRedOp_t>> parseOps(const std::string& text);

}  // namespace reccl::bench
