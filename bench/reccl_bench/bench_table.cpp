#include "bench_table.h"

#include <cinttypes>
#include <cstdio>

#include "reduce/reduce.h"

namespace reccl::bench {
namespace {

// nccl-tests keeps the time column 7 wide by dropping decimals as times grow.
std::string timeText(double us) {
  char buf[32];
  if (us >= 10000.0) std::snprintf(buf, sizeof buf, "%7.0f", us);
  else if (us >= 100.0) std::snprintf(buf, sizeof buf, "%7.1f", us);
  else std::snprintf(buf, sizeof buf, "%7.2f", us);
  return buf;
}

std::string timingText(const Timing& t) {
  char wrong[32];
  if (t.wrong < 0) std::snprintf(wrong, sizeof wrong, "%5s", "N/A");
  else std::snprintf(wrong, sizeof wrong, "%5" PRId64, t.wrong);
  char buf[128];
  std::snprintf(buf, sizeof buf, "  %7s  %6.2f  %6.2f  %5s", timeText(t.timeUs).c_str(), t.algBw, t.busBw, wrong);
  return buf;
}

nlohmann::json timingJson(const Timing& t) {
  nlohmann::json j = {{"time_us", t.timeUs}, {"algbw_gbps", t.algBw}, {"busbw_gbps", t.busBw}};
  j["wrong"] = t.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(t.wrong);
  return j;
}

}  // namespace

Timing makeTiming(Coll c, int64_t bytes, double timeUs, int nranks, int64_t wrong) {
  Timing t;
  t.timeUs = timeUs;
  t.algBw = timeUs > 0 ? double(bytes) / 1e3 / timeUs : 0.0;
  t.busBw = t.algBw * busBwFactor(c, nranks);
  t.wrong = wrong;
  return t;
}

std::string formatRunLine(int nranks, int threads, int64_t minBytes, int64_t maxBytes, double stepFactor,
                          int64_t stepBytes, int warmup, int iters, bool check) {
  char step[64];
  if (stepFactor > 1.0) std::snprintf(step, sizeof step, "%g(factor)", stepFactor);
  else std::snprintf(step, sizeof step, "%" PRId64 "(bytes)", stepBytes);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "# nRanks %d nThread %d minBytes %" PRId64 " maxBytes %" PRId64
                " step: %s warmup iters: %d iters: %d validation: %d\n",
                nranks, threads, minBytes, maxBytes, step, warmup, iters, check ? 1 : 0);
  return buf;
}

std::string formatColumnHeader() {
  char l1[256], l2[256], l3[256];
  std::snprintf(l1, sizeof l1, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n",
                "", "", "", "", "");
  std::snprintf(l2, sizeof l2, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
                "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::snprintf(l3, sizeof l3, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  return std::string("#\n") + l1 + l2 + l3;
}

std::string formatRow(const Row& r) {
  char head[160];
  std::snprintf(head, sizeof head, "%12" PRId64 "  %12zu  %8s  %6s  %6d", r.bytes, r.count, reduce::typeName(r.type),
                r.op ? reduce::opName(*r.op) : "none", r.root);
  char na[64];
  std::snprintf(na, sizeof na, "  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
  std::string line = head;
  line += r.outOfPlace ? timingText(*r.outOfPlace) : na;
  line += r.inPlace ? timingText(*r.inPlace) : na;
  return line + "\n";
}

std::string formatFooter(int64_t outOfBounds, double avgBusBw) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "# Out of bounds values : %" PRId64 " %s\n# Avg bus bandwidth    : %g \n#\n",
                outOfBounds, outOfBounds ? "FAILED" : "OK", avgBusBw);
  return buf;
}

nlohmann::json rowJson(const Row& r) {
  nlohmann::json j = {{"coll", collName(r.coll)},       {"size_bytes", r.bytes}, {"count", r.count},
                      {"type", reduce::typeName(r.type)}, {"root", r.root}};
  j["redop"] = r.op ? reduce::opName(*r.op) : "none";
  j["out_of_place"] = r.outOfPlace ? timingJson(*r.outOfPlace) : nlohmann::json(nullptr);
  j["in_place"] = r.inPlace ? timingJson(*r.inPlace) : nlohmann::json(nullptr);
  return j;
}

}  // namespace reccl::bench
