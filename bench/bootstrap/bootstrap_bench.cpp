// The bootstrap with one root against several (recclCommInitRankScalable): N ranks as threads
// of this process run the real exchange (core/bootstrap.h) over loopback against R roots; per
// layout, the wall time until every rank holds the table, and what the busiest root and root 0
// sent (tables, bytes, connections). On one machine every root shares its CPUs, so the wall
// time shows the cost of the extra hop more than the spread; the roots' loads are the figure
// that carries over to roots on their own hosts.
#include <arpa/inet.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap.h"
#include "core/wire.h"

namespace {

using namespace reccl;

// A rank's record the size of a real one: a host identity of boot id, name and namespace, and
// four NICs.
core::RankInfo infoOf(int rank, int ranksPerHost) {
  core::RankInfo i;
  i.rank = rank;
  const int host = rank / ranksPerHost;
  i.hostName = "gpu-node-" + std::to_string(host);
  i.hostId = "5f0c1d2e-3a4b-4c5d-8e9f-" + std::to_string(100000000000 + host) + "/" + i.hostName + "/net:[4026531840]";
  i.pid = 4000 + static_cast<uint32_t>(rank);
  i.dataPort = static_cast<uint16_t>(30000 + rank % 30000);
  i.chunkBytes = 524288;
  i.slots = 8;
  i.nchannels = 4;
  for (int n = 0; n < 4; ++n)
    i.nics.push_back({"ens" + std::to_string(n + 1) + "f0np0", htonl((10u << 24) | (static_cast<uint32_t>(n) << 16) | static_cast<uint32_t>(host))});
  return i;
}

struct Run {
  double wallMs = 0;
  int root0Tables = 0, busiestTables = 0;
  bool ok = true;
  std::string error;
};

Run once(int nranks, int nroots, int ranksPerHost) {
  Run out;
  std::vector<std::shared_ptr<core::BootstrapRoot>> roots;
  std::vector<core::UniqueIdData> ids;
  for (int k = 0; k < nroots; ++k) {
    core::BootstrapConfig cfg;
    cfg.addr = htonl(INADDR_LOOPBACK);
    cfg.jobId = 0xb007ull << 16 | static_cast<uint64_t>(k);
    cfg.bootKey = core::randomKey();
    cfg.deadline = Deadline::afterMs(60000);
    transport::Endpoint ep;
    auto root = core::BootstrapRoot::start(cfg, &ep);
    if (!root.ok()) {
      out.ok = false;
      out.error = root.status().message();
      return out;
    }
    roots.push_back(*root);
    ids.push_back({ep.addr, ep.port, cfg.jobId, cfg.bootKey});
  }
  std::vector<Status> got(nranks, Status::Ok());
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  ts.reserve(nranks);
  for (int r = 0; r < nranks; ++r)
    ts.emplace_back([&, r] {
      auto res = core::bootstrapExchange(ids, r, nranks, [&](uint32_t) { return Result<core::RankInfo>(infoOf(r, ranksPerHost)); },
                                         Deadline::afterMs(60000));
      got[r] = res.status();
    });
  for (auto& t : ts) t.join();
  out.wallMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (int r = 0; r < nranks; ++r)
    if (!got[r].ok()) {
      out.ok = false;
      out.error = "rank " + std::to_string(r) + ": " + got[r].message();
      break;
    }
  out.root0Tables = roots[0]->tablesSent();
  for (auto& root : roots) out.busiestTables = std::max(out.busiestTables, root->tablesSent() + root->blocksSent());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"reccl bootstrap: one root against several (recclCommInitRankScalable)"};
  int nranks = 512, rounds = 5, ranksPerHost = 8;
  std::vector<int> layouts = {1, 4, 16};
  app.add_option("-n,--ranks", nranks, "ranks (threads)")->check(CLI::Range(1, 4096));
  app.add_option("-r,--roots", layouts, "root counts to compare, the first is the baseline")->check(CLI::Range(1, 1024));
  app.add_option("--rounds", rounds, "runs per layout (the median is shown)")->check(CLI::Range(1, 100));
  app.add_option("--ranks-per-host", ranksPerHost, "ranks that share a host identity in the records")->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);
  for (int r : layouts)
    if (r > nranks) {
      fprintf(stderr, "bootstrap_bench: --roots %d is more than --ranks %d\n", r, nranks);
      return 2;
    }
  // Two sockets per rank (its own, the root's end) and a leader's second pair.
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < static_cast<rlim_t>(3 * nranks + 64)) {
    fprintf(stderr, "bootstrap_bench: %d ranks need %d descriptors, the limit is %llu\n", nranks, 3 * nranks + 64,
            static_cast<unsigned long long>(lim.rlim_cur));
    return 2;
  }
  const size_t tableBytes = core::encodeRankTable([&] {
                              std::vector<core::RankInfo> t;
                              for (int r = 0; r < nranks; ++r) t.push_back(infoOf(r, ranksPerHost));
                              return t;
                            }()).size();
  printf("# %d ranks as threads, rank table %zu bytes, %d rounds each (median wall time)\n", nranks, tableBytes, rounds);
  printf("%6s %10s %12s %14s %14s %12s\n", "roots", "wall ms", "root 0 sent", "root 0 MB", "busiest sent", "wall ratio");
  double base = 0;
  for (int nroots : layouts) {
    std::vector<double> walls;
    Run last;
    for (int i = 0; i < rounds; ++i) {
      last = once(nranks, nroots, ranksPerHost);
      if (!last.ok) {
        fprintf(stderr, "bootstrap_bench: %d roots: %s\n", nroots, last.error.c_str());
        return 1;
      }
      walls.push_back(last.wallMs);
    }
    std::sort(walls.begin(), walls.end());
    const double med = walls[walls.size() / 2];
    if (base == 0) base = med;
    printf("%6d %10.1f %12d %14.2f %14d %12.2f\n", nroots, med, last.root0Tables,
           static_cast<double>(last.root0Tables) * static_cast<double>(tableBytes) / 1e6, last.busiestTables, med / base);
  }
  return 0;
}
