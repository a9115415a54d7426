#include "bench_table.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "reduce/reduce.h"

namespace reccl::bench {
namespace {

std::string printf1(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

// The width of one row part (out-of-place or in-place): time, algbw, busbw, #wrong and, with -I,
// four more.
size_t partWidth(const TableStyle& s) { return 2 + 7 + 2 + 6 + 2 + 6 + 2 + 6 + (s.perIter ? 4 * (2 + 7) : 0); }

std::string partText(const Timing& t, const TableStyle& s) {
  std::string out = "  " + numberCell(t.timeUs, 7) + "  " + numberCell(t.algBw, 6) + "  " + numberCell(t.busBw, 6);
  // nccl-tests prints N/A here when the results are not checked (-c 0); a reader of its output
  // knows that one.
  out += t.wrong < 0 ? std::string("     N/A") : printf1("  %6g", double(t.wrong));
  if (s.perIter) {
    IterStats none;
    const IterStats& st = t.perIter ? *t.perIter : none;
    out += "  " + numberCell(st.minUs, 7) + "  " + numberCell(st.maxUs, 7) + "  " + numberCell(st.p99Us, 7) + "  " +
           numberCell(st.cvPct, 7);
  }
  return out;
}

nlohmann::json timingJson(const Timing& t) {
  nlohmann::json j = {{"time_us", t.timeUs}, {"algbw_gbps", t.algBw}, {"busbw_gbps", t.busBw}};
  j["wrong"] = t.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(t.wrong);
  return j;
}

// Nearest-rank percentile index of n sorted samples.
size_t percentileIndex(size_t n, size_t percentile) {
  return std::min(n - 1, (n * percentile + 99) / 100 - 1);
}

}  // namespace

IterStats iterStats(std::vector<double> timesUs, int skip) {
  IterStats s;
  s.skipped = skip;
  s.timesUs = timesUs;
  if (skip < 0 || size_t(skip) >= timesUs.size()) return s;
  std::vector<double> v(timesUs.begin() + skip, timesUs.end());
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.minUs = v.front();
  s.maxUs = v.back();
  s.p50Us = v[n / 2];
  s.p95Us = v[percentileIndex(n, 95)];
  s.p99Us = v[percentileIndex(n, 99)];
  double sum = 0;
  for (double x : v) sum += x;
  s.avgUs = sum / double(n);
  double var = 0;
  for (double x : v) var += (x - s.avgUs) * (x - s.avgUs);
  s.stdevUs = std::sqrt(var / double(n));
  s.cvPct = s.avgUs > 0 ? s.stdevUs / s.avgUs * 100.0 : 0.0;
  return s;
}

Timing makeTiming(Coll c, int64_t bytes, double timeUs, int nranks, int64_t wrong) {
  Timing t;
  t.timeUs = timeUs;
  t.algBw = timeUs > 0 ? double(bytes) / 1e3 / timeUs : 0.0;
  t.busBw = t.algBw * busBwFactor(c, nranks);
  t.wrong = wrong;
  return t;
}

std::string numberCell(double v, int width) {
  char buf[64];
  for (const char* fmt : {"%*.2f", "%*.1f", "%*.0f"})
    if (std::snprintf(buf, sizeof buf, fmt, width, v) <= width) return buf;
  std::snprintf(buf, sizeof buf, width >= 7 ? "%*.1e" : "%*.0e", width, v);
  return buf;
}

std::string formatVersionLines(const std::string& tool, int headerVersion, int libraryVersion,
                               const std::string& program) {
  return printf1("# %s version %d.%d.%d reccl-headers=%d reccl-library=%d\n# Collective test starting: %s\n",
                 tool.c_str(), headerVersion / 10000, headerVersion / 100 % 100, headerVersion % 100, headerVersion,
                 libraryVersion, program.c_str());
}

std::string formatRunLine(const BenchOptions& o) {
  std::string step = o.stepFactor > 1.0 ? printf1("%g(factor)", o.stepFactor) : printf1("%" PRId64 "(bytes)", o.stepBytes);
  std::string out = printf1("# nThread %d nGpus %d minBytes %" PRId64 " maxBytes %" PRId64
                            " step: %s warmup iters: %d iters: %d agg iters: %d validation: %d graph: 0 unalign: %d\n",
                            o.threads, o.gpus, o.minBytes, o.maxBytes, step.c_str(), o.warmupIters, o.iters, o.aggIters,
                            o.checkIters, o.unalign);
  if (o.blocking == 1) out += "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n";
  if (o.blocking == 2) out += "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n";
  if (o.blocking == 3)
    out += "# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n";
  if (o.perIterTiming) {
    out += "# Per-Iteration Report: host timing; i_* uses max over ranks";
    if (o.perIterSkip) out += printf1("; summary skips first %d iterations", o.perIterSkip);
    out += " \n";
  }
  return out + "#\n";
}

std::string formatDeviceLine(int rank, int group, int pid, const std::string& host, int device,
                             const std::string& info) {
  return printf1("#  Rank %2d Group %2d Pid %6d on %10s device %2d [cpu] %s\n", rank, group, pid, host.c_str(), device,
                 info.c_str());
}

std::string formatColumnHeader(const TableStyle& s) {
  const char* t = s.cputime ? "cputime" : "time";
  const int tsPad = s.timestamps ? 19 : 0;
  const char* tsLbl = s.timestamps ? "timestamp" : "";
  const char* tsFmt = s.timestamps ? "%Y-%m-%d %H:%M:%S" : "";
  std::string out = "#\n";
  if (s.perIter) {
    out += printf1("# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                                "
                   "in-place (+ per-iteration)\n",
                   "", "", "", "", "");
    out += printf1("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  "
                   "%7s  %7s %*s\n",
                   "size", "count", "type", "redop", "root", t, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99",
                   "i_cv%", t, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", tsPad, tsLbl);
    out += printf1("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  "
                   "%7s  %7s %*s\n",
                   "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", "(us)",
                   "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", tsPad, tsFmt);
    return out;
  }
  out += printf1("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "",
                 "", "", "");
  out += printf1("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type",
                 "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw", "busbw", "#wrong", tsPad, tsLbl);
  out += printf1("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "", "",
                 "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", tsPad, tsFmt);
  return out;
}

std::string formatRow(const Row& r, const TableStyle& s) {
  std::string line = printf1("%12" PRId64 "  %12zu  %8s  %6s  %6d", r.bytes, r.count, reduce::typeName(r.type),
                             r.op ? opName(*r.op) : "none", r.root);
  // A part the collective lacks is left blank, as nccl-tests does: no text where numbers go.
  line += r.outOfPlace ? partText(*r.outOfPlace, s) : std::string(partWidth(s), ' ');
  line += r.inPlace ? partText(*r.inPlace, s) : std::string(partWidth(s), ' ');
  if (s.timestamps) line += printf1("%21s", r.timestamp.c_str());
  return line + "\n";
}

bool busBwOk(double avgBusBw, double minBusBw) { return minBusBw < 0 || avgBusBw >= minBusBw * 0.9; }

std::string formatFooter(int64_t outOfBounds, double avgBusBw, double minBusBw, const std::string& program,
                         const std::string& error) {
  std::string out = printf1("# %-20s : %" PRId64 " %s\n", "Out of bounds values", outOfBounds, outOfBounds ? "FAILED" : "OK");
  out += printf1("# %-20s : %g %s\n", "Avg bus bandwidth", avgBusBw,
                 minBusBw < 0 ? "" : busBwOk(avgBusBw, minBusBw) ? "OK" : "FAILED");
  out += "#\n# Collective test concluded: " + program + "\n#\n";
  out += error.empty() ? std::string("\n") : "# error: " + error + "\n";
  return out;
}

nlohmann::json rowJson(const Row& r) {
  nlohmann::json j = {{"coll", collName(r.coll)},       {"size_bytes", r.bytes}, {"count", r.count},
                      {"type", reduce::typeName(r.type)}, {"root", r.root}};
  j["redop"] = r.op ? opName(*r.op) : "none";
  j["out_of_place"] = r.outOfPlace ? timingJson(*r.outOfPlace) : nlohmann::json(nullptr);
  j["in_place"] = r.inPlace ? timingJson(*r.inPlace) : nlohmann::json(nullptr);
  return j;
}

}  // namespace reccl::bench
