#include "bench_report.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <thread>

#include "reduce/reduce.h"

extern char** environ;

namespace reccl::bench {

void Report::add(const Row& r, const nlohmann::json& extra) {
  for (const std::optional<Timing>* t : {&r.outOfPlace, &r.inPlace}) {
    if (!*t) continue;
    busBwSum += (*t)->busBw;
    ++busBwCount;
    if ((*t)->wrong > 0) wrongTotal += (*t)->wrong;
  }
  nlohmann::json j = rowJson(r);
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  rows.push_back(std::move(j));
  table.push_back(r);
}

nlohmann::json environmentJson(const BenchOptions& o, int nranks) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  char date[64];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  nlohmann::json env = nlohmann::json::object();
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string k = kv.substr(0, eq);
    if (k.rfind("RECCL_", 0) == 0 || k == "RANK" || k == "WORLD_SIZE" || k == "LOCAL_RANK" ||
        k == "LOCAL_WORLD_SIZE" || k == "MASTER_ADDR" || k == "MASTER_PORT")
      env[k] = kv.substr(eq + 1);
  }
  return {{"host", host},
          {"pid", int(getpid())},
          {"date", date},
          {"nranks", nranks},
          {"threads", o.ranksHere() > 1 ? o.ranksHere() : 0},
          {"reduce_isa", reduce::isaName()},
          {"cpus", int(std::thread::hardware_concurrency())},
          {"argv", o.argv},
          {"env", env}};
}

bool writeReportJson(const std::string& path, const std::string& tool, const nlohmann::json& environment,
                     const Report& report) {
  nlohmann::json j;
  j["tool"] = tool;
  j["environment"] = environment;
  j["rows"] = report.rows;
  j["out_of_bounds"] = report.wrongTotal;
  j["avg_busbw_gbps"] = report.avgBusBw();
  j["status"] = report.ok() ? "ok" : "failed";
  if (!report.error.empty()) j["error"] = report.error;
  std::ofstream f(path);
  if (f) f << j.dump(2) << "\n";
  f.close();
  if (!f) {
    std::fprintf(stderr, "%s: --json: cannot write %s: %s\n", tool.c_str(), path.c_str(), std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace reccl::bench
