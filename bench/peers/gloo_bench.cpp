// gloo_bench: the same runs, table and JSON as reccl-bench, done by Gloo (Debian's libgloo) over
// its TCP transport on one interface, for side-by-side comparisons on the same testbed.
// Ranks from the launcher's environment (RANK, WORLD_SIZE); rendezvous through a FileStore in a
// directory every rank sees (Debian's build has no TCP store).
//
//   RANK=0 WORLD_SIZE=2 gloo_bench --iface lo --store-dir /tmp/gs -b 64M -e 64M &
//   RANK=1 WORLD_SIZE=2 gloo_bench --iface lo --store-dir /tmp/gs -b 64M -e 64M
//   reccl testbed run --name tb -- gloo_bench --iface rail0 --store-dir /tmp/gs --algo all
#include <gloo/config.h>
#include <gloo/allgather_ring.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/gather.h>
#include <gloo/scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cerrno>
#include <csignal>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench_data.h"
#include "bench_options.h"
#include "bench_report.h"
#include "bench_table.h"
#include "reccl/common/params.h"
#include "reduce/reduce.h"

namespace reccl::bench {
namespace {

constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 64;

#define RECCL_STR_(x) #x
#define RECCL_STR(x) RECCL_STR_(x)
constexpr const char* kGlooVersion =
    RECCL_STR(GLOO_VERSION_MAJOR) "." RECCL_STR(GLOO_VERSION_MINOR) "." RECCL_STR(GLOO_VERSION_PATCH);

constexpr const char* kUsage = R"(gloo_bench: Gloo peer of reccl-bench (same flags, table and JSON)
Own options (everything else as reccl-bench --help; -t is not supported):
  --iface NAME      bind Gloo's TCP device to this interface (e.g. rail0); default
                    $GLOO_SOCKET_IFNAME, else lo when MASTER_ADDR is local
  --addr ADDR       bind to this address instead of an interface
  --store-dir DIR   FileStore rendezvous directory shared by all ranks; must be fresh per run
                    (default /tmp/reccl-gloo-$MASTER_PORT); rank 0 removes it at the end
  --algo A          allreduce algorithm: ring, ring_chunked or all (default all)
  --timeout-ms MS   Gloo's I/O timeout (default 60000)
  --timeline        record every timed iteration (rank 0's CLOCK_MONOTONIC start and end) in
                    the JSON's "timeline", also the iterations done before an error
Collectives (--coll): allreduce, allgather, broadcast, gather, scatter. Types: float. Ops: sum,
prod, max, min.
Gloo's allreduce and broadcast work in place only, its gather and scatter out of place only: the
other columns are left blank.
Environment: RANK, WORLD_SIZE (MASTER_PORT names the default store directory).
)";

struct GlooOptions {
  std::string iface, addr, storeDir;
  std::vector<std::string> algos{"ring", "ring_chunked"};
  int timeoutMs = 60000;
  bool timeline = false;
};

int envInt(const char* name, int def) {
  const char* v = std::getenv(name);
  if (!v || !*v) return def;
  auto r = params::parseSize(v);
  return r.ok() ? int(r.value()) : -1;
}

// Takes gloo_bench's own flags out of argv; the rest goes to reccl-bench's parser.
Result<GlooOptions> extractOwnFlags(std::vector<const char*>& args) {
  GlooOptions g;
  std::vector<const char*> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    auto value = [&](const char* flag) -> Result<std::string> {
      if (i + 1 >= args.size()) return Status(Errc::kInvalidArgument, std::string(flag) + ": needs a value");
      return std::string(args[++i]);
    };
    if (a == "--iface") {
      RECCL_ASSIGN_OR_RETURN(g.iface, value("--iface"));
    } else if (a == "--addr") {
      RECCL_ASSIGN_OR_RETURN(g.addr, value("--addr"));
    } else if (a == "--store-dir") {
      RECCL_ASSIGN_OR_RETURN(g.storeDir, value("--store-dir"));
    } else if (a == "--algo") {
      RECCL_ASSIGN_OR_RETURN(std::string v, value("--algo"));
      if (v == "all") g.algos = {"ring", "ring_chunked"};
      else if (v == "ring" || v == "ring_chunked") g.algos = {v};
      else return Status(Errc::kInvalidArgument, "--algo: expected ring, ring_chunked or all, got " + v);
    } else if (a == "--timeout-ms") {
      RECCL_ASSIGN_OR_RETURN(std::string v, value("--timeout-ms"));
      auto ms = params::parseSize(v);
      if (!ms.ok() || ms.value() <= 0) return Status(Errc::kInvalidArgument, "--timeout-ms: not a positive number: " + v);
      g.timeoutMs = int(ms.value());
    } else if (a == "--timeline") {
      g.timeline = true;
    } else if (a == "-t" || a == "--threads") {
      return Status(Errc::kInvalidArgument, a + ": gloo_bench runs one rank per process");
    } else {
      rest.push_back(args[i]);
    }
  }
  args = rest;
  return g;
}

class GlooRunner {
 public:
  // timeline (may be null): gets one entry per timed loop, filled as the loop runs, so a loop
  // that Gloo aborts with an error keeps the iterations it completed.
  GlooRunner(const BenchOptions& o, const GlooOptions& g, std::shared_ptr<gloo::Context> ctx, Report* report,
             nlohmann::json* timeline)
      : o_(o), g_(g), ctx_(std::move(ctx)), rank_(ctx_->rank), n_(ctx_->size), report_(report), timeline_(timeline) {}

  void run() {
    if (report_) {
      std::printf("%s# nRanks %d\n", formatRunLine(o_).c_str(), n_);
      std::printf("# gloo %s, tcp device on %s\n", kGlooVersion, bindText().c_str());
    }
    for (Coll c : o_.colls) {
      std::vector<std::string> algos = c == Coll::kAllReduce ? g_.algos : std::vector<std::string>{"ring"};
      if (c == Coll::kBroadcast) algos = {"one_to_all"};
      if (c == Coll::kGather || c == Coll::kScatter) algos = {"direct"};
      for (const std::string& algo : algos) {
        if (report_) std::printf("#\n# Collective: %s (gloo %s)\n%s", collName(c), algo.c_str(), formatColumnHeader().c_str());
        std::fflush(stdout);
        std::vector<recclRedOp_t> ops = collReduces(c) ? o_.ops : std::vector<recclRedOp_t>{recclSum};
        for (recclRedOp_t op : ops) {
          for (int root : rootsOf(c, o_.root, n_))
            for (int64_t bytes : sizeList(o_)) runRow(c, algo, op, root, bytes);
        }
      }
    }
  }

  std::string bindText() const { return !g_.addr.empty() ? g_.addr : g_.iface; }

 private:
  static const gloo::ReductionFunction<float>* fn(recclRedOp_t op) {
    switch (op) {
      case recclProd: return gloo::ReductionFunction<float>::product;
      case recclMax: return gloo::ReductionFunction<float>::max;
      case recclMin: return gloo::ReductionFunction<float>::min;
      default: return gloo::ReductionFunction<float>::sum;
    }
  }

  double maxAcrossRanks(double v) {
    std::vector<double*> p{&v};
    gloo::AllreduceRing<double>(ctx_, p, 1, gloo::ReductionFunction<double>::max).run();
    return v;
  }
  double sumAcrossRanks(double v) {
    std::vector<double*> p{&v};
    gloo::AllreduceRing<double>(ctx_, p, 1, gloo::ReductionFunction<double>::sum).run();
    return v;
  }
  // -a, as reccl-bench: rank 0's time, the mean, the minimum or the maximum over ranks.
  double timeAcrossRanks(double us) {
    std::vector<double*> p{&us};
    switch (o_.average) {
      case 0: {
        double mine = rank_ == 0 ? us : 0.0;
        return sumAcrossRanks(mine);
      }
      case 2: gloo::AllreduceRing<double>(ctx_, p, 1, gloo::ReductionFunction<double>::min).run(); return us;
      case 3: return maxAcrossRanks(us);
      default: return sumAcrossRanks(us) / n_;
    }
  }

  // Times `algo` (constructed once, as Gloo users do) and checks one fresh run.
  template <typename Algo, typename Refill>
  Timing measure(Algo& algo, Refill refill, const DataSpec& d, const Shape& s, const void* out) {
    // Gloo writes straight into peers' output buffers: nobody may start before everyone has
    // refilled (and poisoned) theirs.
    refill();
    gloo::BarrierAllToAll(ctx_).run();
    for (int i = 0; i < o_.warmupIters; ++i) algo.run();
    gloo::BarrierAllToAll(ctx_).run();
    nlohmann::json* loop = nullptr;
    if (timeline_) {
      timeline_->push_back({{"coll", collName(d.coll)}, {"algo", algoName_}, {"bytes", int64_t(s.count * sizeof(float))},
                            {"completed", false}, {"iterations", nlohmann::json::array()}});
      loop = &timeline_->back();
    }
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) {
      // steady_clock is CLOCK_MONOTONIC here: the same clock as reccl-bench's fault timeline
      // and the fault injection's timestamps.
      auto a = std::chrono::steady_clock::now();
      algo.run();
      if (loop) {
        auto b = std::chrono::steady_clock::now();
        (*loop)["iterations"].push_back({{"start_mono_ns", a.time_since_epoch().count()},
                                         {"end_mono_ns", b.time_since_epoch().count()},
                                         {"us", std::chrono::duration<double, std::micro>(b - a).count()}});
      }
    }
    auto t1 = std::chrono::steady_clock::now();
    if (loop) (*loop)["completed"] = true;
    double us = timeAcrossRanks(std::chrono::duration<double, std::micro>(t1 - t0).count() / o_.iters);
    int64_t wrong = -1;
    if (o_.check) {
      refill();
      gloo::BarrierAllToAll(ctx_).run();
      algo.run();
      size_t first = 0;
      size_t mine = countWrong(d, rank_, s, out, &first);
      if (mine)
        std::fprintf(stderr, "gloo_bench: rank %d: %s count %zu: %zu wrong, first at %zu\n", rank_, collName(d.coll),
                     s.count, mine, first);
      wrong = int64_t(sumAcrossRanks(double(mine)));
    }
    return makeTiming(d.coll, int64_t(s.count * sizeof(float)), us, n_, wrong);
  }

  // Gloo's gather and scatter are functions over options: measure() runs objects.
  struct GatherRun {
    gloo::GatherOptions opts;
    void run() { gloo::gather(opts); }
  };
  struct ScatterRun {
    gloo::ScatterOptions opts;
    void run() { gloo::scatter(opts); }
  };

  void runRow(Coll c, const std::string& algo, recclRedOp_t op, int root, int64_t bytes) {
    Shape s = shapeFor(c, size_t(bytes) / sizeof(float), n_, rank_);
    if (s.count == 0 || s.paramCount == 0) return;  // Gloo's algorithms reject empty buffers
    DataSpec d{c, recclFloat32, op, n_, root < 0 ? 0 : root};
    Row row;
    row.coll = c;
    row.count = s.paramCount;
    row.bytes = int64_t(s.count * sizeof(float));
    row.type = recclFloat32;
    if (collReduces(c)) row.op = op;
    row.root = root;
    std::vector<float> send(s.sendCount), recv(s.recvCount);
    const int count = int(s.paramCount);
    algoName_ = algo;
    if (c == Coll::kAllReduce) {
      std::vector<float*> ptrs{recv.data()};
      auto refill = [&] { fillInput(d, rank_, s, recv.data()); };
      if (algo == "ring_chunked") {
        gloo::AllreduceRingChunked<float> a(ctx_, ptrs, count, fn(op));
        row.inPlace = measure(a, refill, d, s, recv.data());
      } else {
        gloo::AllreduceRing<float> a(ctx_, ptrs, count, fn(op));
        row.inPlace = measure(a, refill, d, s, recv.data());
      }
    } else if (c == Coll::kAllGather) {
      std::vector<const float*> in{send.data()};
      gloo::AllgatherRing<float> a(ctx_, in, recv.data(), count);
      auto refill = [&] {
        fillInput(d, rank_, s, send.data());
        std::memset(recv.data(), 0xA5, recv.size() * sizeof(float));
      };
      row.outOfPlace = measure(a, refill, d, s, recv.data());
    } else if (c == Coll::kGather) {  // gloo::gather: each rank sends to the root, which receives from all
      GatherRun a{gloo::GatherOptions(ctx_)};
      a.opts.setInput(send.data(), size_t(count));
      if (rank_ == d.root) a.opts.setOutput(recv.data(), recv.size());
      a.opts.setRoot(d.root);
      auto refill = [&] {
        fillInput(d, rank_, s, send.data());
        std::memset(recv.data(), 0xA5, recv.size() * sizeof(float));
      };
      row.outOfPlace = measure(a, refill, d, s, recv.data());
    } else if (c == Coll::kScatter) {
      ScatterRun a{gloo::ScatterOptions(ctx_)};
      if (rank_ == d.root) {
        std::vector<float*> blocks;
        for (int r = 0; r < n_; ++r) blocks.push_back(send.data() + size_t(r) * size_t(count));
        a.opts.setInputs(blocks, size_t(count));
      }
      a.opts.setOutput(recv.data(), size_t(count));
      a.opts.setRoot(d.root);
      auto refill = [&] {
        fillInput(d, rank_, s, send.data());
        std::memset(recv.data(), 0xA5, recv.size() * sizeof(float));
      };
      row.outOfPlace = measure(a, refill, d, s, recv.data());
    } else {  // broadcast
      std::vector<float*> ptrs{recv.data()};
      gloo::BroadcastOneToAll<float> a(ctx_, ptrs, size_t(count), d.root);
      auto refill = [&] { fillInput(d, rank_, s, recv.data()); };
      row.inPlace = measure(a, refill, d, s, recv.data());
    }
    if (report_) {
      std::printf("%s", formatRow(row).c_str());
      std::fflush(stdout);
      report_->add(row, {{"algo", algo}, {"library", "gloo"}});
    }
  }

  const BenchOptions& o_;
  const GlooOptions& g_;
  std::shared_ptr<gloo::Context> ctx_;
  int rank_, n_;
  Report* report_;
  nlohmann::json* timeline_;
  std::string algoName_;
};

// Adds the per-iteration timeline to the JSON report writeReportJson wrote.
bool addTimelineToJson(const std::string& path, const nlohmann::json& loops) {
  nlohmann::json j;
  {
    std::ifstream in(path);
    j = nlohmann::json::parse(in, nullptr, false);
  }
  if (!j.is_object()) {
    std::fprintf(stderr, "gloo_bench: --json: cannot reread %s\n", path.c_str());
    return false;
  }
  j["timeline"] = {{"clock", "CLOCK_MONOTONIC"}, {"rank", 0}, {"loops", loops}};
  std::ofstream out(path);
  out << j.dump(1) << "\n";
  out.close();
  if (!out) {
    std::fprintf(stderr, "gloo_bench: --json: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  return true;
}

int run(int argc, char** argv) {
  std::vector<const char*> args(argv, argv + argc);
  if (argc > 1 && (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help"))) {
    std::printf("%s", kUsage);
    return kExitOk;
  }
  auto own = extractOwnFlags(args);
  if (!own.ok()) {
    std::fprintf(stderr, "gloo_bench: %s\n", own.status().message().c_str());
    return kExitUsage;
  }
  GlooOptions& g = own.value();
  auto parsed = parseOptions(int(args.size()), args.data());
  if (!parsed.ok()) {
    std::fprintf(stderr, "gloo_bench: %s (try --help)\n", parsed.status().message().c_str());
    return kExitUsage;
  }
  BenchOptions& o = parsed.value();
  if (o.help) {
    std::printf("%s", kUsage);
    return kExitOk;
  }
  for (Coll c : o.colls)
    if (c != Coll::kAllReduce && c != Coll::kAllGather && c != Coll::kBroadcast && c != Coll::kGather &&
        c != Coll::kScatter) {
      std::fprintf(stderr, "gloo_bench: --coll: %s is not measured here (allreduce, allgather, broadcast, gather, scatter)\n",
                   collName(c));
      return kExitUsage;
    }
  for (recclDataType_t t : o.types)
    if (t != recclFloat32) {
      std::fprintf(stderr, "gloo_bench: -d/--datatype: only float is measured, not %s\n", reduce::typeName(t));
      return kExitUsage;
    }
  for (recclRedOp_t op : o.ops)
    if (op == recclAvg) {
      std::fprintf(stderr, "gloo_bench: -o/--op: Gloo has no avg\n");
      return kExitUsage;
    }
  const int rank = envInt("RANK", -1), world = envInt("WORLD_SIZE", -1);
  if (rank < 0 || world < 1 || rank >= world) {
    std::fprintf(stderr, "gloo_bench: RANK and WORLD_SIZE must be set (0 <= RANK < WORLD_SIZE)\n");
    return kExitUsage;
  }
  if (o.root >= world) {
    std::fprintf(stderr, "gloo_bench: -r/--root: %d is not a rank (%d ranks)\n", o.root, world);
    return kExitUsage;
  }
  if (g.iface.empty() && g.addr.empty()) {
    const char* env = std::getenv("GLOO_SOCKET_IFNAME");
    const char* master = std::getenv("MASTER_ADDR");
    if (env && *env) g.iface = env;
    else if (!master || !std::strncmp(master, "127.", 4) || !std::strcmp(master, "localhost")) g.iface = "lo";
    else {
      std::fprintf(stderr, "gloo_bench: --iface or --addr is required (MASTER_ADDR %s is not local)\n", master);
      return kExitUsage;
    }
  }
  if (g.storeDir.empty()) {
    const char* port = std::getenv("MASTER_PORT");
    g.storeDir = std::string("/tmp/reccl-gloo-") + (port && *port ? port : "default");
  }
  std::error_code ec;
  std::filesystem::create_directories(g.storeDir, ec);
  if (ec) {
    std::fprintf(stderr, "gloo_bench: --store-dir: cannot create %s: %s\n", g.storeDir.c_str(), ec.message().c_str());
    return kExitFailed;
  }

  Report report;
  Report* mine = rank == 0 ? &report : nullptr;
  nlohmann::json timeline = nlohmann::json::array();
  std::string bind;
  try {
    gloo::transport::tcp::attr attr;
    if (!g.addr.empty()) attr.hostname = g.addr;
    else attr.iface = g.iface;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore fileStore(g.storeDir);
    gloo::rendezvous::PrefixStore store("gloo_bench", fileStore);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
    ctx->setTimeout(std::chrono::milliseconds(g.timeoutMs));
    ctx->connectFullMesh(store, dev);
    GlooRunner runner(o, g, ctx, mine, g.timeline && rank == 0 ? &timeline : nullptr);
    bind = runner.bindText();
    runner.run();
    // Goodbye from rank 0: the others exit only after rank 0 needs nothing more from them. A
    // rank that closes its sockets early makes Gloo fail the peer's last receive even when the
    // data had arrived. The store was last used by connectFullMesh, so rank 0 may remove it.
    int token = 0;
    std::vector<int*> tokenPtr{&token};
    try {
      gloo::BroadcastOneToAll<int>(ctx, tokenPtr, 1, 0).run();
    } catch (const std::exception& e) {
      // Rank 0 closes right after sending the goodbye; Gloo may report that close before it hands
      // the token over. A rank other than 0 has nothing left to do by then: say so, do not fail.
      if (rank == 0) throw;
      std::string msg = e.what();
      for (char& ch : msg)
        if (ch == '\n') ch = ' ';
      std::fprintf(stderr, "gloo_bench: rank %d: goodbye from rank 0 cut short after the run: %s\n", rank,
                   msg.c_str());
    }
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (char& ch : msg)
      if (ch == '\n') ch = ' ';
    std::fprintf(stderr, "gloo_bench: rank %d: %s\n", rank, msg.c_str());
    report.error = "rank " + std::to_string(rank) + ": " + msg;
    if (rank != 0) return kExitFailed;
  }
  if (rank != 0) return kExitOk;
  std::filesystem::remove_all(g.storeDir, ec);
  std::printf("%s", formatFooter(report.wrongTotal, report.avgBusBw(), -1, "gloo_bench", report.error).c_str());
  std::fflush(stdout);
  bool jsonOk = true;
  if (!o.jsonPath.empty()) {
    nlohmann::json env = environmentJson(o, world);
    env["gloo_version"] = kGlooVersion;
    env["bind"] = bind;
    jsonOk = writeReportJson(o.jsonPath, "gloo_bench", env, report);
    if (jsonOk && g.timeline) jsonOk = addTimelineToJson(o.jsonPath, timeline);
  }
  return report.ok() && jsonOk ? kExitOk : kExitFailed;
}

}  // namespace
}  // namespace reccl::bench

int main(int argc, char** argv) {
  // A peer that dies mid-write must end in Gloo's error (reported, exit 1), not in SIGPIPE
  // killing this rank before its JSON is written.
  std::signal(SIGPIPE, SIG_IGN);
  return reccl::bench::run(argc, argv);
}
