#include "reccl/sim/bench_costs.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "library_defaults.h"

namespace reccl::sim {

using nlohmann::json;

namespace {

Status missing(const std::string& key, const std::string& why = "missing") {
  return {Errc::kInvalidArgument, "costs: " + key + ": " + why};
}

// The value at a dotted path, or the first missing key's name.
Result<const json*> at(const json& j, const std::vector<std::string>& path) {
  const json* cur = &j;
  std::string name;
  for (const auto& k : path) {
    name += (name.empty() ? "" : ".") + k;
    if (!cur->is_object() || !cur->contains(k)) return missing(name);
    cur = &(*cur)[k];
  }
  return cur;
}

Result<double> numberAt(const json& j, const std::vector<std::string>& path, const std::string& name) {
  RECCL_ASSIGN_OR_RETURN(const json* v, at(j, path));
  if (v->is_null()) return missing(name, "null (the run measured none)");
  if (!v->is_number() || !std::isfinite(v->get<double>())) return missing(name, "must be a number");
  return v->get<double>();
}

}  // namespace

Result<BenchCosts> readBenchCosts(const json& j) {
  if (!j.is_object()) return missing("(top)", "must be the JSON object reccl-bench --json writes");
  RECCL_ASSIGN_OR_RETURN(const json* tool, at(j, {"tool"}));
  if (*tool != "reccl-bench") return missing("tool", "must be \"reccl-bench\"");
  RECCL_ASSIGN_OR_RETURN(const json* mode, at(j, {"mode"}));
  if (*mode != "fault-plan") return missing("mode", "must be \"fault-plan\" (a reccl-bench --fault-plan run)");
  RECCL_ASSIGN_OR_RETURN(const json* faults, at(j, {"faults"}));
  if (!faults->is_array()) return missing("faults", "must be an array");

  BenchCosts c;
  // The run's hold-down, to tell the fail-back's own delay from the wait the run asked for.
  double holdS = double(libraryDefault("RECCL_HOLDDOWN_MS")) / 1e3;
  if (j.contains("environment") && j["environment"].is_object() && j["environment"].contains("env")) {
    const json& env = j["environment"]["env"];
    if (env.is_object() && env.contains("RECCL_HOLDDOWN_MS") && env["RECCL_HOLDDOWN_MS"].is_string())
      holdS = std::strtod(env["RECCL_HOLDDOWN_MS"].get<std::string>().c_str(), nullptr) / 1e3;
  }
  std::vector<double> stalls, delays;
  for (size_t i = 0; i < faults->size(); ++i) {
    const json& f = (*faults)[i];
    const std::string where = "faults[" + std::to_string(i) + "]";
    if (!f.is_object() || !f.contains("failover")) return missing(where + ".failover");
    if (!f.contains("stall_ms")) return missing(where + ".stall_ms");
    if (!f["failover"].is_boolean()) return missing(where + ".failover", "must be true or false");
    const json& s = f["stall_ms"];
    if (!s.is_null() && !(s.is_number() && std::isfinite(s.get<double>()) && s.get<double>() >= 0))
      return missing(where + ".stall_ms", "must be a number >= 0 or null");
    ++c.faults;
    if (f["failover"].get<bool>() && s.is_number()) {
      ++c.faultsWithFailover;
      stalls.push_back(s.get<double>() / 1e3);
      const json* rec = f.contains("recover_at_s") ? &f["recover_at_s"] : nullptr;
      const json* back = f.contains("failed_back_at_s") ? &f["failed_back_at_s"] : nullptr;
      if (rec && back && rec->is_number() && back->is_number())
        delays.push_back(std::max(0.0, back->get<double>() - rec->get<double>() - holdS));
    }
  }
  if (stalls.empty()) return missing("faults[].stall_ms", "no fault failed over with a measured stall");
  c.stallS = Dist::empirical(std::move(stalls));
  c.failBacks = int(delays.size());
  if (!delays.empty()) c.failBackDelayS = Dist::empirical(std::move(delays));

  RECCL_ASSIGN_OR_RETURN(double detectMs, numberAt(j, {"summary", "signal_after_fault_ms", "p50"},
                                                   "summary.signal_after_fault_ms.p50"));
  c.detectS = std::max(0.0, detectMs / 1e3);
  RECCL_ASSIGN_OR_RETURN(double bw, numberAt(j, {"summary", "ratios", "degraded_over_before"},
                                             "summary.ratios.degraded_over_before"));
  if (bw <= 0) return missing("summary.ratios.degraded_over_before", "must be > 0");
  c.bwAfter = std::min(1.0, bw);
  return c;
}

void applyBenchCosts(Scenario& s, const BenchCosts& c) {
  for (auto& p : s.policies) {
    if (p.name != "reccl" && p.name != "reccl-no-failback") continue;
    p.detectS = c.detectS;
    p.stallS = c.stallS;
    p.failBackStallS = c.stallS;
    p.failBackDelayS = c.failBackDelayS;
    p.bwAfter = c.bwAfter;
  }
}

}  // namespace reccl::sim
