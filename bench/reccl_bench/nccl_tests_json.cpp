#include "nccl_tests_json.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "reduce/reduce.h"
#include "reccl/common/unique_fd.h"

namespace reccl::bench {
namespace {

const char* jsonBool(bool b) { return b ? "true" : "false"; }

// NAME=value with the value hidden when the name says it is a secret.
std::string envEntry(const std::string& kv) {
  const std::string name = kv.substr(0, kv.find('='));
  for (const char* word : {"SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"})
    if (name.find(word) != std::string::npos) return name + "=<hidden>";
  return kv;
}

nlohmann::ordered_json part(const Timing& t, const BenchOptions& o) {
  nlohmann::ordered_json j;
  j[o.reportCputime ? "cpu_time" : "time"] = t.timeUs;
  j["alg_bw"] = t.algBw;
  j["bus_bw"] = t.busBw;
  j["nwrong"] = t.wrong < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(double(t.wrong));
  return j;
}

nlohmann::ordered_json perIterJson(const IterStats& s) {
  nlohmann::ordered_json j;
  j["skipped_iterations"] = s.skipped;
  j["min_us"] = s.minUs;
  j["max_us"] = s.maxUs;
  j["avg_us"] = s.avgUs;
  j["p50_us"] = s.p50Us;
  j["p95_us"] = s.p95Us;
  j["p99_us"] = s.p99Us;
  j["stdev_us"] = s.stdevUs;
  j["cv_pct"] = s.cvPct;
  j["times_us"] = s.timesUs;
  if (s.perProcessUs.size() > 1) j["per_process_max_times_us"] = s.perProcessUs;
  return j;
}

}  // namespace

nlohmann::ordered_json ncclTestsJson(const BenchOptions& o, const NcclTestsRun& run) {
  nlohmann::ordered_json j;
  j["version"] = 3;
  j["start_time"] = run.startTime;
  j["args"] = run.args;
  nlohmann::ordered_json env = nlohmann::ordered_json::array();
  for (const std::string& kv : run.env) env.push_back(envEntry(kv));
  j["env"] = env;
  j["nccl_version"] = run.version;
  j["reccl_version"] = run.version;
  nlohmann::ordered_json cfg;
  cfg["nthreads"] = o.threads;
  cfg["ngpus"] = o.gpus;
  cfg["minimum_bytes"] = o.minBytes;
  cfg["maximum_bytes"] = o.maxBytes;
  if (o.stepFactor > 1.0) cfg["step_factor"] = o.stepFactor;
  else cfg["step_bytes"] = o.stepBytes;
  cfg["warmup_iters"] = o.warmupIters;
  cfg["iterations"] = o.iters;
  cfg["aggregated_iterations"] = o.aggIters;
  cfg["validation"] = o.checkIters;
  cfg["graph"] = 0;
  cfg["blocking_collectives"] = jsonBool(o.blocking != 0);
  cfg["per_iter_timing"] = jsonBool(o.perIterTiming);
  cfg["per_iter_skip"] = o.perIterSkip;
  cfg["parallel_init"] = jsonBool(true);
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const DeviceInfo& d : run.devices) {
    nlohmann::ordered_json dj;
    dj["rank"] = d.rank;
    dj["group"] = d.group;
    dj["pid"] = d.pid;
    dj["hostname"] = d.hostname;
    dj["device"] = d.device;
    dj["device_hex"] = "cpu";
    dj["device_info"] = d.info;
    devices.push_back(dj);
  }
  cfg["devices"] = devices;
  j["config"] = cfg;
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const Row& r : run.rows) {
    nlohmann::ordered_json rj;
    rj["size"] = r.bytes;
    rj["count"] = r.count;
    rj["type"] = reduce::typeName(r.type);
    rj["redop"] = r.op ? opName(*r.op) : "none";
    char root[16];
    std::snprintf(root, sizeof root, "%6i", r.root);
    rj["root"] = root;
    rj["out_of_place"] = r.outOfPlace ? part(*r.outOfPlace, o) : nlohmann::ordered_json(nullptr);
    if (r.outOfPlace && r.outOfPlace->perIter) rj["out_of_place_per_iter"] = perIterJson(*r.outOfPlace->perIter);
    rj["in_place"] = r.inPlace ? part(*r.inPlace, o) : nlohmann::ordered_json(nullptr);
    if (r.inPlace && r.inPlace->perIter) rj["in_place_per_iter"] = perIterJson(*r.inPlace->perIter);
    rj["actual_iterations"] = o.iters;
    rj["experiment_name"] = "";
    rj["collective"] = collName(r.coll);
    results.push_back(rj);
  }
  j["results"] = results;
  nlohmann::ordered_json oob;
  oob["count"] = run.outOfBounds;
  oob["okay"] = jsonBool(run.outOfBounds == 0);
  j["out_of_bounds"] = oob;
  nlohmann::ordered_json bw;
  bw["bandwidth"] = run.avgBusBw;
  bw["okay"] = run.minBusBw < 0 ? "unchecked" : jsonBool(busBwOk(run.avgBusBw, run.minBusBw));
  j["average_bus_bandwidth"] = bw;
  j["errors"] = run.errors;
  j["end_time"] = run.endTime;
  return j;
}

Result<std::string> writeExclusive(const std::string& path, const std::string& text) {
  std::string tryPath = path;
  for (int n = 0; n < 1000; ++n) {
    UniqueFd fd(open(tryPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd) {
      size_t off = 0;
      while (off < text.size()) {
        ssize_t w = write(fd.get(), text.data() + off, text.size() - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return Status::FromErrno(errno, "cannot write " + tryPath);
        off += size_t(w);
      }
      return tryPath;
    }
    if (errno != EEXIST) return Status::FromErrno(errno, tryPath + " not accessible");
    tryPath = path + "." + std::to_string(n);
  }
  return Status(Errc::kExists, path + ": it and " + path + ".0 ... .999 exist");
}

std::string localTimestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace reccl::bench
