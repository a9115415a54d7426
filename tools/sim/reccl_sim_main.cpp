// reccl-sim: GPU-hours that failover saves at scale. A discrete-event simulation of a
// data-parallel training job on a rail-optimised cluster under last-hop link faults, replaying
// one seeded fault sequence per seed under every policy (docs/simulation.md).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "reccl/cli/finite_number.h"
#include "reccl/sim/bench_costs.h"
#include "reccl/sim/report.h"
#include "reccl/sim/scenario.h"
#include "reccl/sim/simulate.h"

namespace {

using namespace reccl::sim;
using nlohmann::json;

constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 64, kExitUnsupported = 77;

int usage(const std::string& msg) {
  std::fprintf(stderr, "reccl-sim: %s\n", msg.c_str());
  return kExitUsage;
}

// The file's JSON, or a message naming the option and the file.
reccl::Result<json> readJson(const std::string& option, const std::string& path) {
  std::ifstream f(path);
  if (!f) return reccl::Status::FromErrno(errno, option + ": cannot open " + path);
  try {
    return json::parse(f);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number past a double's range
    return reccl::Status{reccl::Errc::kInvalidArgument, option + ": " + path + ": not JSON: " + e.what()};
  }
}

// "[#####.....]  45 % 123/270 runs 1.2 s" on stderr, redrawn at most every 100 ms.
class ProgressBar {
 public:
  explicit ProgressBar(bool on) : on_(on), t0_(std::chrono::steady_clock::now()) {}
  void update(size_t done, size_t total) {
    if (!on_) return;
    auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 30;
    int filled = total ? int(double(done) / double(total) * kWidth) : kWidth;
    std::string bar(size_t(filled), '#');
    bar.append(size_t(kWidth - filled), '.');
    double s = std::chrono::duration<double>(now - t0_).count();
    std::fprintf(stderr, "\r[%s] %3d %% %zu/%zu runs %.1f s", bar.c_str(), total ? int(100.0 * double(done) / double(total)) : 100,
                 done, total, s);
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  bool on_;
  std::chrono::steady_clock::time_point t0_, last_{};
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"reccl-sim: GPU-hours lost to last-hop link faults per failover policy, from measured costs"};
  app.footer(
      "Every input not given keeps its documented default (docs/simulation.md); --print-scenario shows them.\n\n"
      "EXAMPLES:\n"
      "  reccl-sim --gpus 32768 --days 365 --seed 1 --json out.json\n"
      "  reccl-sim --seeds 10 --sweep-gpus 64,512,4096,32768,131072 --plot loss.png\n"
      "  reccl-sim --costs fault_run.json --scenario my_cluster.json --seeds 20\n"
      "  reccl-sim --scenario validate.json --trace faults.json --costs fault_run.json --json sim.json\n"
      "  reccl-sim --fused --policies fail-stop,completion-timer,reccl\n\n"
      "Exit: 0 done, 1 an output could not be written, 64 bad input, 77 gnuplot missing for --plot.");
  std::string scenarioPath, costsPath, tracePath, jsonPath, plotPath, policiesArg;
  std::vector<int64_t> sweep;
  int64_t gpus = 0;
  double days = 0, workS = 0;
  uint64_t seed = 1;
  int seeds = 1;
  bool fused = false, progress = false, noProgress = false, printScenario = false, quiet = false;
  app.add_option("--scenario", scenarioPath, "JSON scenario: cluster, job, faults, policies (overrides defaults)");
  app.add_option("--costs", costsPath, "reccl-bench --fault-plan --json file: reccl's measured stall, detection, bandwidth");
  app.add_option("--trace", tracePath, "replay these faults (JSON trace) instead of drawing them");
  app.add_option("--gpus", gpus, "GPUs in the job (cluster.gpus)")->check(CLI::Range(int64_t(1), int64_t(100'000'000)));
  app.add_option("--days", days, "simulated span in days (job.days)")
      ->check(reccl::cli::FiniteNumber)
      ->check(CLI::Range(1e-9, 36500.0));
  app.add_option("--work-s", workS, "run until this much fault-free work is done; report the wall time (job.work_s)")
      ->check(reccl::cli::FiniteNumber)
      ->check(CLI::Range(1e-9, 1e12));
  app.add_option("--seed", seed, "first seed (default 1)")->check(CLI::NonNegativeNumber);
  app.add_option("--seeds", seeds, "seeds to run; results are mean ± 95 % CI over them (default 1)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--policies", policiesArg, "comma-separated subset of the policies (default: all)");
  app.add_option("--sweep-gpus", sweep, "cluster sizes to sweep, e.g. 64,512,4096,32768")->delimiter(',')
      ->check(CLI::Range(int64_t(1), int64_t(100'000'000)));
  app.add_flag("--fused", fused, "the NICs are fused in groups (cluster.fused_nics)");
  app.add_option("--plot", plotPath, "PNG of GPU-hours lost vs cluster size (gnuplot; needs --sweep-gpus)");
  app.add_option("--json", jsonPath, "write every result and the effective scenario as JSON");
  app.add_flag("--progress", progress, "progress bar on stderr even when it is not a terminal");
  app.add_flag("--no-progress", noProgress, "no progress bar");
  app.add_flag("--print-scenario", printScenario, "print the effective scenario as JSON and exit");
  app.add_flag("-q,--quiet", quiet, "no table on stdout");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage(e.what());
  }

  Scenario s = defaultScenario();
  if (!costsPath.empty()) {
    auto j = readJson("--costs", costsPath);
    if (!j.ok()) return usage(j.status().message());
    auto c = readBenchCosts(j.value());
    if (!c.ok()) return usage("--costs " + costsPath + ": " + c.status().message());
    applyBenchCosts(s, c.value());
  }
  if (!scenarioPath.empty()) {
    auto j = readJson("--scenario", scenarioPath);
    if (!j.ok()) return usage(j.status().message());
    auto applied = applyScenarioJson(j.value(), s);
    if (!applied.ok()) return usage("--scenario " + scenarioPath + ": " + applied.status().message());
    s = std::move(applied.value());
  }
  if (gpus) s.cluster.gpus = gpus;
  if (days > 0) {
    s.job.days = days;
    s.job.workS = 0;
  }
  if (workS > 0) s.job.workS = workS;
  if (fused) s.cluster.fusedNics = true;
  if (auto st = validateScenario(s); !st.ok()) return usage(st.message());
  if (printScenario) {
    std::printf("%s\n", scenarioToJson(s).dump(1).c_str());
    return kExitOk;
  }
  if (!plotPath.empty() && sweep.size() < 2) return usage("--plot: needs --sweep-gpus with two sizes or more");

  std::vector<FaultEvent> trace;
  if (!tracePath.empty()) {
    auto j = readJson("--trace", tracePath);
    if (!j.ok()) return usage(j.status().message());
    if (!sweep.empty()) return usage("--trace: a trace names its hosts; it does not go with --sweep-gpus");
    auto t = parseTrace(j.value(), s.cluster);
    if (!t.ok()) return usage("--trace " + tracePath + ": " + t.status().message());
    trace = std::move(t.value());
  }

  SimOptions o;
  o.gpuSizes = sweep;
  o.seed = seed;
  o.seeds = seeds;
  o.trace = tracePath.empty() ? nullptr : &trace;
  for (size_t at = 0; !policiesArg.empty() && at <= policiesArg.size();) {
    size_t comma = policiesArg.find(',', at);
    if (comma == std::string::npos) comma = policiesArg.size();
    o.policies.push_back(policiesArg.substr(at, comma - at));
    at = comma + 1;
  }
  const bool many = sweep.size() > 1 || seeds > 1;
  ProgressBar bar(!noProgress && (progress || (many && ::isatty(STDERR_FILENO))));
  o.progress = [&](size_t done, size_t total) { bar.update(done, total); };
  auto r = simulate(s, o);
  if (!r.ok()) return usage(r.status().message());

  RunDescription d{seed, seeds, tracePath, costsPath};
  if (!quiet) std::fputs(formatTable(s, d, r.value()).c_str(), stdout);
  std::fflush(stdout);
  int rc = kExitOk;
  if (!jsonPath.empty()) {
    std::ofstream f(jsonPath);
    f << resultsToJson(s, d, r.value()).dump(1) << "\n";
    f.close();
    if (!f) {
      std::fprintf(stderr, "reccl-sim: --json: cannot write %s: %s\n", jsonPath.c_str(), std::strerror(errno));
      rc = kExitFailed;
    }
  }
  if (!plotPath.empty()) {
    std::string title = "GPU-hours lost to last-hop link faults, " +
                        (s.job.workS > 0 ? std::to_string(int64_t(s.job.workS)) + " s of work"
                                         : std::to_string(int64_t(s.job.days)) + " days") +
                        ", " + std::to_string(seeds) + " seed(s)";
    if (auto st = plotLossVsSize(r.value(), title, plotPath); !st.ok()) {
      std::fprintf(stderr, "reccl-sim: %s\n", st.message().c_str());
      return st.code() == reccl::Errc::kUnsupported ? kExitUnsupported : kExitFailed;
    }
  }
  return rc;
}
