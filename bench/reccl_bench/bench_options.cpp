#include "bench_options.h"

#include <CLI/CLI.hpp>

#include <cstring>
#include <sstream>

#include "reccl/common/params.h"
#include "reduce/reduce.h"

namespace reccl::bench {
namespace {

constexpr const char* kExamples = R"(
Examples:
  reccl-bench -t 4 -b 8 -e 128M -f 2                  allreduce, 4 ranks as threads
  reccl testbed run -- reccl-bench -b 64M -e 64M -n 20 --json out.json
  torchrun --nproc-per-node 2 ... reccl-bench --coll allgather -d all
  reccl-bench -t 2 --coll reduce -o all -r -1 -b 1K -e 1M -f 4
  reccl testbed run -- reccl-bench --fault-plan faults.json --json out.json   allreduce 64M under faults
Without -t, ranks come from the launcher's environment (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT,
OMPI_COMM_WORLD_*, PMI_*, SLURM_*). Calls pass a NULL stream, so every call has completed when it
returns; -z is accepted for nccl-tests compatibility and changes nothing.
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
    if (t == "all") {
      for (int i = 0; i < recclNumOps; ++i) out.push_back(recclRedOp_t(i));
      continue;
    }
    int found = -1;
    for (int i = 0; i < recclNumOps; ++i)
      if (t == reduce::opName(recclRedOp_t(i))) found = i;
    if (found < 0)
      return Status(Errc::kInvalidArgument, "-o/--op: unknown op '" + t + "' (sum prod max min avg all)");
    out.push_back(recclRedOp_t(found));
  }
  if (out.empty()) return Status(Errc::kInvalidArgument, "-o/--op: empty");
  return out;
}

Result<BenchOptions> parseOptions(int argc, const char* const* argv) {
  BenchOptions o;
  for (int i = 0; i < argc; ++i) o.argv.emplace_back(argv[i]);
  std::string minB = "32M", maxB = "32M", stepB = "1M", type = "float", op = "sum", coll;
  int check = 1, blocking = 0;
  CLI::App app{"reccl-bench: collective benchmark with nccl-tests' flags and table", "reccl-bench"};
  app.footer(kExamples);
  app.set_help_flag();  // handled below, so parsing never prints or exits
  bool help = false;
  app.add_flag("-h,--help", help, "print this help");
  app.add_option("--coll", coll,
                 "allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv, "
                 "a comma list or all (default allreduce; nccl-tests names like all_reduce_perf too)");
  app.add_option("-b,--minbytes", minB, "smallest message in bytes, K/M/G suffixes (default 32M)");
  app.add_option("-e,--maxbytes", maxB, "largest message in bytes (default 32M)");
  app.add_option("-i,--stepbytes", stepB, "size increment when -f is not given (default 1M)");
  app.add_option("-f,--stepfactor", o.stepFactor, "size multiplier (> 1)");
  app.add_option("-n,--iters", o.iters, "timed iterations per row (default 20)");
  app.add_option("-w,--warmup_iters", o.warmupIters, "untimed iterations before each row (default 5)");
  app.add_option("-c,--check", check, "check every element of the results: 0 or 1 (default 1)");
  app.add_option("-d,--datatype", type, "element type, a comma list or all (default float)");
  app.add_option("-o,--op", op, "reduction op: sum prod max min avg, a comma list or all (default sum)");
  app.add_option("-r,--root", o.root, "root rank of broadcast/reduce; -1: every rank in turn (default 0)");
  app.add_option("-z,--blocking", blocking, "0 or 1, for nccl-tests compatibility (calls always complete)");
  app.add_option("-t,--threads", o.threads, "run this many ranks as threads in one process");
  app.add_option("--json", o.jsonPath, "also write every row and the environment to this JSON file");
  app.add_option("--fault-plan", o.faultPlanPath,
                 "run allreduce (one size, -e, default 64M) in a loop while rank 0 runs this reccl inject "
                 "plan; per-iteration timeline and per-fault stall and bus bandwidth in --json");
  app.add_option("--fault-log", o.faultLogPath, "with --fault-plan: write the plan's JSON-lines log here");
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
  if (!coll.empty()) {
    o.colls.clear();
    for (const std::string& c : splitList(coll)) {
      if (c == "all") {
        o.colls.assign(std::begin(kAllColls), std::end(kAllColls));
        continue;
      }
      auto parsed = parseColl(c);
      if (!parsed) return Status(Errc::kInvalidArgument, "--coll: unknown collective '" + c + "'");
      o.colls.push_back(*parsed);
    }
    if (o.colls.empty()) return Status(Errc::kInvalidArgument, "--coll: empty");
  }
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
  if (o.stepFactor != 0 && !(o.stepFactor > 1.0))
    return Status(Errc::kInvalidArgument, "-f/--stepfactor: must be greater than 1");
  if (o.stepFactor == 0 && o.stepBytes <= 0 && o.maxBytes > o.minBytes)
    return Status(Errc::kInvalidArgument, "-i/--stepbytes: must be positive");
  if (o.iters < 1) return Status(Errc::kInvalidArgument, "-n/--iters: must be at least 1");
  if (o.warmupIters < 0) return Status(Errc::kInvalidArgument, "-w/--warmup_iters: must not be negative");
  if (check != 0 && check != 1) return Status(Errc::kInvalidArgument, "-c/--check: must be 0 or 1");
  if (blocking != 0 && blocking != 1) return Status(Errc::kInvalidArgument, "-z/--blocking: must be 0 or 1");
  if (o.root < -1) return Status(Errc::kInvalidArgument, "-r/--root: must be a rank or -1");
  if (o.threads < 0) return Status(Errc::kInvalidArgument, "-t/--threads: must not be negative");
  o.check = check == 1;
  o.blocking = blocking == 1;
  RECCL_ASSIGN_OR_RETURN(o.types, parseTypes(type));
  RECCL_ASSIGN_OR_RETURN(o.ops, parseOps(op));
  if (o.faultPlanPath.empty()) {
    if (!o.faultLogPath.empty()) return Status(Errc::kInvalidArgument, "--fault-log: needs --fault-plan");
    return o;
  }
  // Fault mode: one allreduce size, checked bit for bit every iteration.
  if (o.colls.size() != 1 || o.colls[0] != Coll::kAllReduce)
    return Status(Errc::kInvalidArgument, "--coll: --fault-plan runs allreduce only");
  if (o.threads > 0) return Status(Errc::kInvalidArgument, "-t/--threads: --fault-plan needs ranks as processes");
  if (o.faultTailMs < 0) return Status(Errc::kInvalidArgument, "--fault-tail-ms: must not be negative");
  if (o.types.size() != 1 || o.ops.size() != 1)
    return Status(Errc::kInvalidArgument, "-d/-o: --fault-plan takes one type and one op");
  if (o.ops[0] == recclAvg)
    return Status(Errc::kInvalidArgument, "-o/--op: avg is not bit-exact; --fault-plan checks every result exactly");
  return o;
}

std::vector<int64_t> sizeList(const BenchOptions& o) {
  std::vector<int64_t> out;
  for (int64_t s = o.minBytes; s <= o.maxBytes;) {
    out.push_back(s);
    int64_t next;
    if (o.stepFactor > 1.0) {
      next = static_cast<int64_t>(double(s) * o.stepFactor);
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
