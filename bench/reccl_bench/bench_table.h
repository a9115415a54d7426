// nccl-tests' result table: its preamble, column layout, number formats (a field that does not
// fit its width loses decimals, then goes to exponent form, never text) and footer, so tools
// that read all_reduce_perf's output read reccl-bench's too; and the rows for JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_options.h"
#include "collective.h"
#include "reccl/reccl.h"

namespace reccl::bench {

// -I: one row part's per-iteration times (us, the slowest rank of each iteration) and their
// statistics over the iterations after the skipped ones (nccl-tests' nearest-rank percentiles,
// population standard deviation).
struct IterStats {
  int skipped = 0;
  double minUs = 0, maxUs = 0, avgUs = 0, p50Us = 0, p95Us = 0, p99Us = 0, stdevUs = 0, cvPct = 0;
  std::vector<double> timesUs;
  std::vector<std::vector<double>> perProcessUs;  // one row per process when there are several
};
IterStats iterStats(std::vector<double> timesUs, int skip);

struct Timing {
  double timeUs = 0;   // average per call, reduced over ranks as -a says
  double algBw = 0;    // GB/s (1e9 bytes)
  double busBw = 0;    // GB/s
  int64_t wrong = -1;  // wrong elements over all ranks; -1: not checked
  std::optional<IterStats> perIter;
};

struct Row {
  Coll coll = Coll::kAllReduce;
  int64_t bytes = 0;  // the size column: the larger of the send and receive buffers
  size_t count = 0;   // the count column: the count argument of the call (nccl-tests)
  recclDataType_t type = recclFloat32;
  std::optional<recclRedOp_t> op;  // none for collectives without a reduction
  int root = -1;                   // -1 for collectives without a root
  std::optional<Timing> outOfPlace;  // none where the implementation has no out-of-place form
  std::optional<Timing> inPlace;     // none where the collective has no in-place form
  std::string timestamp;             // -S: "%Y-%m-%d %H:%M:%S" when the row ended
};

// How rows are drawn: -C names the time column cputime, -S adds a timestamp, -I four columns.
struct TableStyle {
  bool cputime = false;
  bool timestamps = false;
  bool perIter = false;
  static TableStyle of(const BenchOptions& o) { return {o.reportCputime, o.reportTimestamps, o.perIterTiming}; }
};

// algbw and busbw from bytes and time, nccl-tests' definitions.
Timing makeTiming(Coll c, int64_t bytes, double timeUs, int nranks, int64_t wrong);

// nccl-tests' number cell: %.2f, else %.1f, else %.0f, else exponent form, within `width`.
std::string numberCell(double v, int width);

// "# <tool> version ..." and "# Collective test starting: <program>".
std::string formatVersionLines(const std::string& tool, int headerVersion, int libraryVersion,
                               const std::string& program);
// "# nThread ... nGpus ... step: ... validation: ..." and the -z / -I / -p lines after it.
std::string formatRunLine(const BenchOptions& o);
// "#  Rank  0 Group  0 Pid  1234 on   hostname device  0 [cpu] <info>" (nccl-tests' device line).
std::string formatDeviceLine(int rank, int group, int pid, const std::string& host, int device,
                             const std::string& info);
std::string formatColumnHeader(const TableStyle& style = {});  // "#" and the three header lines
std::string formatRow(const Row& r, const TableStyle& style = {});
// Out-of-bounds and average-bus-bandwidth lines, "Collective test concluded", and the error
// line (or an empty one). minBusBw < 0: not checked (NCCL_TESTS_MIN_BW unset).
std::string formatFooter(int64_t outOfBounds, double avgBusBw, double minBusBw, const std::string& program,
                         const std::string& error = "");
// NCCL_TESTS_MIN_BW's verdict: the average must reach 90 % of it.
bool busBwOk(double avgBusBw, double minBusBw);

nlohmann::json rowJson(const Row& r);

}  // namespace reccl::bench
