// reccl-bench's command line: every flag of nccl-tests (its spellings, defaults and meanings
// where they mean something for host buffers; the GPU-only ones are accepted and noted), plus
// --coll, --json and the --fault-plan family. Parsing never exits or throws: errors come back as
// a Status whose message names the argument.
#pragma once

#include <cstdint>
#include <functional>
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
  int aggIters = 1;    // -m: calls per timed iteration (nccl-tests groups them; here back to back)
  int runCycles = 1;   // -N: times the whole size sweep runs; 0: until killed
  int checkIters = 1;  // -c: checked calls per row, stopping at the first wrong one; 0: none
  bool check = true;   // checkIters > 0
  std::vector<recclDataType_t> types{recclFloat32};
  std::vector<recclRedOp_t> ops{recclSum};
  int root = 0;      // -1: every rank in turn
  int blocking = 0;  // -z: 1 barrier after each call, 3 after each iteration (not timed); 0, 2 none
  // Ranks of this process: -t threads x -g "GPUs" per thread, each rank a thread of its own
  // (reccl's calls are synchronous). More than one rank here: recclCommInitAll; one: the
  // launcher's environment (recclCommInitFromEnv) when a launcher started this process.
  int threads = 1;
  int gpus = 1;
  int average = 1;  // -a: the time reported is rank 0's (0), the mean (1), min (2) or max (3) over ranks
  bool reportCputime = false;     // -C: the column says cputime (the same host time: calls are synchronous)
  bool reportTimestamps = false;  // -S: a timestamp ends each row
  int unalign = 0;                // -u: buffers start this many elements past an aligned address
  int localRegister = 0;          // -R: 1 (or 2) the buffers registered with recclCommRegister
  bool perIterTiming = false;     // -I: per-iteration min/max/p99/cv columns and JSON samples
  int perIterSkip = 0;            // -K: leading iterations left out of those statistics
  int timeoutSec = 0;             // -T: RECCL_TIMEOUT_MS for this run (when not set already)
  std::string outputFile;         // -J: nccl-tests' JSON
  std::string jsonPath;           // --json: reccl-bench's JSON (see README)
  // --fault-plan: one allreduce size in a loop while rank 0 runs this reccl inject plan; the loop
  // lasts the plan plus faultTailMs (and at least `iters` iterations). See fault_loop.h.
  std::string faultPlanPath;
  std::string faultLogPath;  // the plan's JSON-lines log (reccl inject plan --log)
  int64_t faultTailMs = 1000;
  // NETNS/DEV: the plan's actions on these devices are background events (a neighbour NIC's link
  // changes), not faults to measure: they have no entry in the fault analysis.
  std::vector<std::string> faultBackground;
  // Carrier actions through one held queue per tap (inject::PlanRunOptions::holdTapQueues).
  bool faultHoldTapQueues = false;
  // Every rank runs --fault-plan (each its own file: a host's own faults), not rank 0 alone; the
  // loop lasts until every rank's plan and tail are done. Rank 0's faults are the ones analysed.
  bool faultPlanEveryRank = false;
  // nccl-tests flags given that mean nothing here (GPU-only), one line each for stderr.
  std::vector<std::string> notes;
  bool help = false;
  std::string helpText;  // filled when help is set
  std::vector<std::string> argv;  // as given, for the JSON record

  int ranksHere() const { return threads * gpus; }
};

// argv[0] may name the collective as nccl-tests binaries do (all_reduce_perf); --coll wins.
Result<BenchOptions> parseOptions(int argc, const char* const* argv);

// The message sizes of a run: min, then +stepBytes or *stepFactor, up to max inclusive.
std::vector<int64_t> sizeList(const BenchOptions& o);

// The world size a launcher gave this process (WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE,
// SLURM_NTASKS, beside their rank variable); 0 when no launcher started it.
int launcherWorldSize(const std::function<const char*(const char*)>& env);

// "float" / "half" ... (nccl-tests names, also "fp16", "bf16", "f32"), "all"; ops likewise.
Result<std::vector<recclDataType_t>> parseTypes(const std::string& text);
Result<std::vector<recclRedOp_t>> parseOps(const std::string& text);

}  // namespace reccl::bench
