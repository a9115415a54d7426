// recclGroupSimulateEnd against the real thing: N ranks as threads of this process
// (recclCommInitAll). Per all-reduce size: what a simulated group of that one all-reduce says
// before the communicator ran anything (the first guess), what it says after `--train` rounds of
// real calls over every size (the model fitted to this machine), and the median of `--iters` real
// calls of that size, timed on rank 0 (each real call also teaches the model, so the estimate is
// taken before them). Prints one row per size and the fitted figures.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "reccl/reccl.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Ranks {
  std::vector<recclComm_t> comms;
  std::vector<std::vector<float>> in, out;
  // fn(rank) on every rank at once; false when a rank's call failed.
  template <typename F>
  bool run(F fn) {
    std::vector<recclResult_t> rc(comms.size(), recclSuccess);
    std::vector<std::thread> ts;
    for (size_t r = 0; r < comms.size(); ++r) ts.emplace_back([&, r] { rc[r] = fn(static_cast<int>(r)); });
    for (auto& t : ts) t.join();
    return std::all_of(rc.begin(), rc.end(), [](recclResult_t x) { return x == recclSuccess; });
  }
  recclResult_t allReduce(int r, size_t count) {
    return recclAllReduce(in[r].data(), out[r].data(), count, recclFloat32, recclSum, comms[r], nullptr);
  }
  // Rank 0's estimate of a group of one all-reduce of `count` (every rank simulates it).
  bool simulate(size_t count, float* us) {
    return run([&](int r) {
      recclSimInfo_t info = RECCL_SIM_INFO_INITIALIZER;
      recclGroupStart();
      allReduce(r, count);
      const recclResult_t rc = recclGroupSimulateEnd(&info);
      if (r == 0) *us = info.estimatedTime;
      return rc;
    });
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"recclGroupSimulateEnd's estimate against measured all-reduces"};
  int nranks = 2, iters = 20, train = 3;
  size_t minBytes = 1024, maxBytes = size_t{64} << 20;
  app.add_option("--ranks", nranks, "ranks, as threads of this process")->check(CLI::Range(2, 64));
  app.add_option("--min-bytes", minBytes, "smallest all-reduce")->check(CLI::Range(size_t{4}, size_t{1} << 30));
  app.add_option("--max-bytes", maxBytes, "largest all-reduce (sizes grow by 8)")->check(CLI::Range(size_t{4}, size_t{1} << 30));
  app.add_option("--iters", iters, "real calls timed per size")->check(CLI::Range(1, 10000));
  app.add_option("--train", train, "rounds of real calls over every size before the estimates")->check(CLI::Range(0, 1000));
  CLI11_PARSE(app, argc, argv);
  if (minBytes > maxBytes) {
    std::fprintf(stderr, "group_sim_bench: --min-bytes is larger than --max-bytes\n");
    return 64;
  }
  std::vector<size_t> sizes;
  for (size_t b = minBytes; b <= maxBytes; b *= 8) sizes.push_back(b / sizeof(float));

  Ranks k;
  k.comms.assign(static_cast<size_t>(nranks), nullptr);
  if (recclCommInitAll(k.comms.data(), nranks, nullptr) != recclSuccess) {
    std::fprintf(stderr, "group_sim_bench: init: %s\n", recclGetLastError(nullptr));
    return 1;
  }
  k.in.assign(static_cast<size_t>(nranks), std::vector<float>(sizes.back(), 1.0f));
  k.out.assign(static_cast<size_t>(nranks), std::vector<float>(sizes.back(), 0.0f));
  int status = 0;
  auto failed = [&](const char* what) {
    std::fprintf(stderr, "group_sim_bench: %s: %s\n", what, recclGetLastError(nullptr));
    status = 1;
  };
  std::vector<float> guess(sizes.size());
  for (size_t i = 0; i < sizes.size() && !status; ++i)
    if (!k.simulate(sizes[i], &guess[i])) failed("simulate (first guess)");
  for (int round = 0; round < train && !status; ++round)
    for (size_t count : sizes)
      if (!k.run([&](int r) { return k.allReduce(r, count); })) failed("training call");
  std::printf("# recclGroupSimulateEnd, one all-reduce of float per group, %d ranks (threads), %d training rounds\n",
              nranks, train);
  std::printf("# %12s %14s %14s %14s %10s %10s\n", "bytes", "guess(us)", "estimate(us)", "measured(us)", "est/meas",
              "guess/meas");
  for (size_t i = 0; i < sizes.size() && !status; ++i) {
    float est = 0;
    if (!k.simulate(sizes[i], &est)) {
      failed("simulate");
      break;
    }
    std::vector<double> us;
    for (int it = 0; it < iters && !status; ++it) {
      double took = 0;
      if (!k.run([&](int r) {
            const auto t0 = Clock::now();
            const recclResult_t rc = k.allReduce(r, sizes[i]);
            if (r == 0) took = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
            return rc;
          }))
        failed("timed call");
      us.push_back(took);
    }
    if (status) break;
    std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
    const double med = us[us.size() / 2];
    std::printf("  %12zu %14.1f %14.1f %14.1f %10.2f %10.2f\n", sizes[i] * sizeof(float), guess[i], est, med, est / med,
                guess[i] / med);
  }
  for (recclComm_t c : k.comms) recclCommDestroy(c);
  return status;
}
