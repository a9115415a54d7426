#include "bench_options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sstream>

#include "reccl/common/params.h"
#include "reduce/reduce.h"

namespace reccl::bench {
namespace {

constexpr const char* kExamples = R"(
Examples:
  reccl-bench -b 8 -e 128M -f 2 -g 4                  allreduce, 4 ranks as threads of this process
  mpirun -np 2 reccl-bench -g 1 -b 1M -e 4M -f 2      one rank per process, no address to set (PMIx)
  srun -N 2 --ntasks-per-node 1 reccl-bench -b 64M -e 64M   likewise under Slurm
  torchrun --nproc-per-node 2 ... reccl-bench --coll allgather -d all
  ln -s reccl-bench all_gather_perf; ./all_gather_perf -b 1K -e 1M -f 4 -t 2   the name picks the collective
  reccl testbed run -- reccl-bench --fault-plan faults.json --json out.json   allreduce 64M under faults
Ranks: with more than one rank in this process (-t x -g), they are threads of it; otherwise the
launcher's environment gives the ranks (mpirun, srun, torchrun; see docs/quickstart.md).
Calls pass a NULL stream, so each has completed when it returns: -z 0 and 2 time the same thing,
-C reports the same host time under the name cputime. Flags that only mean something on a GPU
(-G -R -y -x -D -V -M) are accepted and noted on stderr.
Exit status: 0 all values correct, 1 a wrong value or a failed call, 64 bad arguments.)";

Result<int64_t> size(const std::string& flag, const std::string& text) {
  auto r = params::parseSize(text);
  if (!r.ok()) return Status(Errc::kInvalidArgument, flag + ": " + r.status().message());
  if (r.value() < 0) return Status(Errc::kInvalidArgument, flag + ": must not be negative: " + text);
  return r.value();
}

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

Result<std::vector<recclDataType_t>> parseTypes(const std::string& text) {
  std::vector<recclDataType_t> out;
  for (const std::string& t : splitList(text)) {
    if (t == "all") {
      for (int i = 0; i < recclNumTypes; ++i) out.push_back(recclDataType_t(i));
      continue;
    }
    int found = -1;
    for (int i = 0; i < recclNumTypes; ++i)
      if (t == reduce::typeName(recclDataType_t(i))) found = i;
    if (t == "char") found = recclInt8;
    if (t == "int") found = recclInt32;
    if (t == "fp16" || t == "float16") found = recclFloat16;
    if (t == "fp32" || t == "float32") found = recclFloat32;
    if (t == "fp64" || t == "float64") found = recclFloat64;
    if (t == "bf16") found = recclBfloat16;
    if (t == "f8e4m3" || t == "f8e5m2")
      return Status(Errc::kInvalidArgument, "-d/--datatype: " + t + " (8-bit float) is not a reccl type");
    if (found < 0)
      return Status(Errc::kInvalidArgument,
                    "-d/--datatype: unknown type '" + t +
                        "' (int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 all)");
    out.push_back(recclDataType_t(found));
  }
  if (out.empty()) return Status(Errc::kInvalidArgument, "-d/--datatype: empty");
  return out;
}

Result<std::vector<recclRedOp_t>> parseOps(const std::string& text) {
  std::vector<recclRedOp_t> out;
  for (const std::string& t : splitList(text)) {
    if (t == "all") {  // nccl-tests' all: every op, mulsum last
      for (int i = 0; i <= recclNumOps; ++i) out.push_back(recclRedOp_t(i));
      continue;
    }
    int found = -1;
    for (int i = 0; i <= recclNumOps; ++i)
      if (t == opName(recclRedOp_t(i))) found = i;
    if (found < 0)
      return Status(Errc::kInvalidArgument, "-o/--op: unknown op '" + t + "' (sum prod max min avg mulsum all)");
    out.push_back(recclRedOp_t(found));
  }
  if (out.empty()) return Status(Errc::kInvalidArgument, "-o/--op: empty");
  return out;
}

namespace {

// nccl-tests' flags that only mean something on a GPU: accepted, noted when set.
struct GpuOnlyFlag {
  const char* flags;
  const char* what;
};
constexpr GpuOnlyFlag kGpuOnly[] = {
    {"-G,--cudagraph", "CUDA graph launches"},
    {"-y,--stream_null", "the CUDA null stream"},
    {"-x,--cta_policy", "NCCL's CTA policy"},
    {"-D,--device_implementation", "device-side collectives"},
    {"-V,--device_cta_count", "CTAs of device-side collectives"},
    {"-M,--memory", "the GPU memory report"},
};

Status checkRange(const char* flag, int v, int lo, int hi) {
  if (v >= lo && v <= hi) return Status::Ok();
  return Status(Errc::kInvalidArgument, std::string(flag) + ": " + std::to_string(v) + " is not in [" +
                                            std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

Status parseColls(const std::string& coll, std::vector<Coll>* out) {
  out->clear();
  for (const std::string& c : splitList(coll)) {
    if (c == "all") {
      out->insert(out->end(), std::begin(kAllColls), std::end(kAllColls));
      continue;
    }
    auto parsed = parseColl(c);
    if (!parsed) return Status(Errc::kInvalidArgument, "--coll: unknown collective '" + c + "'");
    out->push_back(*parsed);
  }
  if (out->empty()) return Status(Errc::kInvalidArgument, "--coll: empty");
  return Status::Ok();
}

// What --fault-plan asks of the rest.
Status checkFaultMode(const BenchOptions& o) {
  if (o.faultPlanPath.empty()) {
    if (!o.faultLogPath.empty()) return Status(Errc::kInvalidArgument, "--fault-log: needs --fault-plan");
    if (!o.faultBackground.empty()) return Status(Errc::kInvalidArgument, "--fault-background: needs --fault-plan");
    if (o.faultHoldTapQueues) return Status(Errc::kInvalidArgument, "--fault-hold-tap-queues: needs --fault-plan");
    if (o.faultPlanEveryRank) return Status(Errc::kInvalidArgument, "--fault-plan-every-rank: needs --fault-plan");
    return Status::Ok();
  }
  // Fault mode: one allreduce size, checked bit for bit every iteration.
  if (o.colls.size() != 1 || o.colls[0] != Coll::kAllReduce)
    return Status(Errc::kInvalidArgument, "--coll: --fault-plan runs allreduce only");
  if (o.ranksHere() > 1) return Status(Errc::kInvalidArgument, "-t/--threads: --fault-plan needs ranks as processes");
  if (o.faultTailMs < 0) return Status(Errc::kInvalidArgument, "--fault-tail-ms: must not be negative");
  for (const auto& d : o.faultBackground) {
    const auto slash = d.find('/');
    if (slash == 0 || slash == std::string::npos || slash + 1 == d.size() || d.find('/', slash + 1) != std::string::npos)
      return Status(Errc::kInvalidArgument, "--fault-background: NETNS/DEV, got '" + d + "'");
  }
  if (o.types.size() != 1 || o.ops.size() != 1)
    return Status(Errc::kInvalidArgument, "-d/-o: --fault-plan takes one type and one op");
  if (o.ops[0] == recclAvg)
    return Status(Errc::kInvalidArgument, "-o/--op: avg is not bit-exact; --fault-plan checks every result exactly");
  return Status::Ok();
}

}  // namespace

int launcherWorldSize(const std::function<const char*(const char*)>& env) {
  constexpr std::pair<const char*, const char*> kLaunchers[] = {
      {"RANK", "WORLD_SIZE"}, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"PMI_RANK", "PMI_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& [rank, size] : kLaunchers) {
    const char* r = env(rank);
    if (!r || !*r) continue;
    const char* n = env(size);
    return n && *n ? std::max(1, std::atoi(n)) : 1;
  }
  return 0;
}

Result<BenchOptions> parseOptions(int argc, const char* const* argv) {
  BenchOptions o;
  for (int i = 0; i < argc; ++i) o.argv.emplace_back(argv[i]);
  std::string minB = "32M", maxB = "32M", stepB = "1M", type = "float", op = "sum", coll, root = "0";
  int perIter = 0, cputime = 0, timestamps = 0, parallelInit = 0;
  CLI::App app{"reccl-bench: collective benchmark with nccl-tests' flags, table and JSON", "reccl-bench"};
  app.footer(kExamples);
  app.set_help_flag();  // handled below, so parsing never prints or exits
  bool help = false;
  app.add_flag("-h,--help", help, "print this help");
  app.add_option("--coll", coll,
                 "allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv, gather, scatter, "
                 "a comma list or all (default allreduce; nccl-tests names like all_reduce_perf too)");
  app.add_option("-t,--nthreads,--threads", o.threads, "threads of this process, one rank each per -g (default 1)");
  app.add_option("-g,--ngpus", o.gpus, "ranks per thread, each a thread of its own (default 1)");
  app.add_option("-b,--minbytes", minB, "smallest message in bytes, K/M/G suffixes (default 32M)");
  app.add_option("-e,--maxbytes", maxB, "largest message in bytes (default 32M)");
  app.add_option("-i,--stepbytes", stepB, "size increment when -f is not given (default 1M)");
  app.add_option("-f,--stepfactor", o.stepFactor, "size multiplier (> 1)");
  app.add_option("-n,--iters", o.iters, "timed iterations per row (default 20)");
  app.add_option("-m,--agg_iters", o.aggIters, "calls per timed iteration (default 1)");
  app.add_option("-w,--warmup_iters", o.warmupIters, "untimed iterations before each row (default 5)");
  app.add_option("-N,--run_cycles", o.runCycles, "times the whole sweep runs and prints; 0: until killed (default 1)");
  app.add_option("-p,--parallel_init", parallelInit, "0 or 1: ranks of one process always initialize in parallel");
  app.add_option("-c,--check", o.checkIters, "checked calls per row, every element compared; 0: none (default 1)");
  app.add_option("-d,--datatype", type, "element type, a comma list or all (default float)");
  app.add_option("-o,--op", op,
                 "reduction op: sum prod max min avg mulsum (each rank's input times its own scalar, then summed), "
                 "a comma list or all (default sum)");
  app.add_option("-r,--root", root, "root rank of broadcast/reduce; -1 or all: every rank in turn (default 0)");
  app.add_option("-z,--blocking", o.blocking,
                 "0..3: 1 a barrier after each call (timed), 3 after each iteration (not timed) (default 0)");
  app.add_option("-a,--average", o.average, "time reported: 0 rank 0's, 1 mean, 2 min, 3 max over ranks (default 1)");
  app.add_option("-C,--report_cputime", cputime, "0 or 1: name the time column cputime (the same host time)");
  app.add_option("-S,--report_timestamps", timestamps, "0 or 1: end each row with a timestamp");
  app.add_option("-u,--unalign", o.unalign, "buffers start this many elements past an aligned address (default 0)");
  app.add_option("-I,--per_iter_timing", perIter, "0 or 1: per-iteration min, max, p99 and cv% columns");
  app.add_option("-K,--per_iter_skip", o.perIterSkip, "leading iterations -I leaves out of its statistics");
  app.add_option("-T,--timeout", o.timeoutSec, "seconds a call may make no progress (RECCL_TIMEOUT_MS); 0: its default");
  app.add_option("-J,--output_file", o.outputFile, "also write nccl-tests' JSON (version 3) to this file (.json)");
  app.add_option("-R,--local_register", o.localRegister,
                 "1: register the buffers with each communicator (recclCommRegister); 2: as symmetric windows "
                 "(recclCommWindowRegister)");
  std::vector<int> gpuOnly(std::size(kGpuOnly), 0);
  for (size_t i = 0; i < std::size(kGpuOnly); ++i)
    app.add_option(kGpuOnly[i].flags, gpuOnly[i], std::string("accepted, ignored: ") + kGpuOnly[i].what);
  app.add_option("--json", o.jsonPath, "also write every row and the environment to this JSON file (reccl-bench's)");
  app.add_option("--fault-plan", o.faultPlanPath,
                 "run allreduce (one size, -e, default 64M) in a loop while rank 0 runs this reccl inject "
                 "plan; per-iteration timeline and per-fault stall and bus bandwidth in --json");
  app.add_option("--fault-log", o.faultLogPath, "with --fault-plan: write the plan's JSON-lines log here");
  app.add_option("--fault-background", o.faultBackground,
                 "with --fault-plan: NETNS/DEV whose plan actions are background link events, not faults to "
                 "measure (repeatable)");
  app.add_flag("--fault-hold-tap-queues", o.faultHoldTapQueues,
               "with --fault-plan: change a tap's carrier through one queue held for the plan, so rtnetlink "
               "hears of it only through link-watch, as from a NIC's driver");
  app.add_flag("--fault-plan-every-rank", o.faultPlanEveryRank,
               "with --fault-plan: every rank runs its own plan file (the path read on each rank's host: its "
               "own faults), not rank 0 alone; the report analyses rank 0's");
  app.add_option("--fault-tail-ms", o.faultTailMs,
                 "with --fault-plan: keep looping this long after the plan's last event (default 1000)");
  std::vector<const char*> args(argv, argv + argc);
  try {
    app.parse(argc, const_cast<char**>(args.data()));
  } catch (const CLI::ParseError& e) {
    return Status(Errc::kInvalidArgument, e.what());
  }
  if (help) {
    o.help = true;
    o.helpText = app.help();
    return o;
  }
  if (coll.empty() && argc > 0) {
    const char* base = std::strrchr(argv[0], '/');
    if (auto c = parseColl(base ? base + 1 : argv[0])) coll = collName(*c);
  }
  if (!coll.empty()) RECCL_TRY(parseColls(coll, &o.colls));
  RECCL_ASSIGN_OR_RETURN(o.minBytes, size("-b/--minbytes", minB));
  RECCL_ASSIGN_OR_RETURN(o.maxBytes, size("-e/--maxbytes", maxB));
  RECCL_ASSIGN_OR_RETURN(o.stepBytes, size("-i/--stepbytes", stepB));
  if (!o.faultPlanPath.empty()) {  // one size: -e, else -b, else 64M
    if (app.count("-e")) o.minBytes = o.maxBytes;
    else if (app.count("-b")) o.maxBytes = o.minBytes;
    else o.minBytes = o.maxBytes = 64 << 20;
  }
  if (o.maxBytes < o.minBytes)
    return Status(Errc::kInvalidArgument, "-e/--maxbytes: smaller than -b/--minbytes");
  if (o.stepFactor != 0 && !(o.stepFactor > 1.0 && std::isfinite(o.stepFactor)))
    return Status(Errc::kInvalidArgument, "-f/--stepfactor: must be a finite number greater than 1");
  if (o.stepFactor == 0 && o.stepBytes <= 0 && o.maxBytes > o.minBytes)
    return Status(Errc::kInvalidArgument, "-i/--stepbytes: must be positive");
  if (o.iters < 1) return Status(Errc::kInvalidArgument, "-n/--iters: must be at least 1");
  if (o.warmupIters < 0) return Status(Errc::kInvalidArgument, "-w/--warmup_iters: must not be negative");
  RECCL_TRY(checkRange("-m/--agg_iters", o.aggIters, 1, 1 << 20));
  RECCL_TRY(checkRange("-N/--run_cycles", o.runCycles, 0, 1 << 30));
  RECCL_TRY(checkRange("-c/--check", o.checkIters, 0, 1 << 20));
  RECCL_TRY(checkRange("-z/--blocking", o.blocking, 0, 3));
  RECCL_TRY(checkRange("-a/--average", o.average, 0, 3));
  RECCL_TRY(checkRange("-t/--nthreads", o.threads, 1, 1024));
  RECCL_TRY(checkRange("-g/--ngpus", o.gpus, 1, 1024));
  if (o.ranksHere() > 1024) return Status(Errc::kInvalidArgument, "-t/-g: more than 1024 ranks in one process");
  RECCL_TRY(checkRange("-p/--parallel_init", parallelInit, 0, 1));
  RECCL_TRY(checkRange("-C/--report_cputime", cputime, 0, 1));
  RECCL_TRY(checkRange("-S/--report_timestamps", timestamps, 0, 1));
  RECCL_TRY(checkRange("-I/--per_iter_timing", perIter, 0, 1));
  RECCL_TRY(checkRange("-K/--per_iter_skip", o.perIterSkip, 0, o.iters - 1));
  RECCL_TRY(checkRange("-u/--unalign", o.unalign, 0, 1 << 20));
  RECCL_TRY(checkRange("-T/--timeout", o.timeoutSec, 0, 1 << 20));
  RECCL_TRY(checkRange("-R/--local_register", o.localRegister, 0, 2));
  if (o.perIterSkip > 0 && !perIter)
    return Status(Errc::kInvalidArgument, "-K/--per_iter_skip: needs -I 1");
  if (!o.outputFile.empty() && (o.outputFile.size() < 5 || o.outputFile.compare(o.outputFile.size() - 5, 5, ".json") != 0))
    return Status(Errc::kInvalidArgument, "-J/--output_file: " + o.outputFile + " does not end in .json (the only format)");
  o.check = o.checkIters > 0;
  o.perIterTiming = perIter == 1;
  o.reportCputime = cputime == 1;
  o.reportTimestamps = timestamps == 1;
  if (root == "all") o.root = -1;
  else {
    char* end = nullptr;
    long r = std::strtol(root.c_str(), &end, 10);
    if (root.empty() || *end != '\0' || r < -1 || r > 1 << 20)
      return Status(Errc::kInvalidArgument, "-r/--root: '" + root + "' is not a rank, -1 or all");
    o.root = static_cast<int>(r);
  }
  for (size_t i = 0; i < std::size(kGpuOnly); ++i)
    if (gpuOnly[i] != 0)
      o.notes.push_back(std::string(kGpuOnly[i].flags) + " " + std::to_string(gpuOnly[i]) + ": " + kGpuOnly[i].what +
                        " mean nothing for host buffers; ignored");
  RECCL_ASSIGN_OR_RETURN(o.types, parseTypes(type));
  RECCL_ASSIGN_OR_RETURN(o.ops, parseOps(op));
  RECCL_TRY(checkFaultMode(o));
  return o;
}

std::vector<int64_t> sizeList(const BenchOptions& o) {
  std::vector<int64_t> out;
  for (int64_t s = o.minBytes; s <= o.maxBytes;) {
    out.push_back(s);
    int64_t next;
    if (o.stepFactor > 1.0) {
      const double grown = double(s) * o.stepFactor;
      // Past -e once truncated (as nccl-tests' integer product), and before the cast could overflow.
      if (!(grown < double(o.maxBytes) + 1.0)) break;
      next = static_cast<int64_t>(grown);
      if (next <= s) next = s + 1;  // from 0 or 1 byte a factor alone never grows
    } else {
      if (o.stepBytes <= 0) break;
      next = s + o.stepBytes;
    }
    s = next;
  }
  return out;
}

}  // namespace reccl::bench
