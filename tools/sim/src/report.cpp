#include "reccl/sim/report.h"

#include <cstdio>
#include <optional>
#include <sstream>

namespace reccl::sim {

using nlohmann::json;

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// Enough digits to tell the policies apart at any magnitude.
std::string num(double v) {
  double a = v < 0 ? -v : v;
  if (a >= 1000) return fmt("%.0f", v);
  if (a >= 1) return fmt("%.2f", v);
  return fmt("%.3g", v);
}

std::string interval(const Interval& i, const char* f = nullptr) {
  std::string m = f ? fmt(f, i.mean) : num(i.mean);
  if (!i.half) return m;
  return m + " ± " + (f ? fmt(f, *i.half) : num(*i.half));
}

double meanOf(const std::vector<RunStats>& runs, double RunStats::*field) {
  double s = 0;
  for (const auto& r : runs) s += r.*field;
  return runs.empty() ? 0 : s / double(runs.size());
}
double meanOf(const std::vector<RunStats>& runs, int64_t RunStats::*field) {
  double s = 0;
  for (const auto& r : runs) s += double(r.*field);
  return runs.empty() ? 0 : s / double(runs.size());
}

std::string pad(std::string s, size_t w) {
  // Width in characters, not bytes ("±" is two bytes).
  size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xc0) != 0x80;
  if (chars < w) s.append(w - chars, ' ');
  return s;
}

json faultCountsJson(const SizeOutcome& so) {
  static const char* kNames[4] = {"down", "flap", "gray", "other"};
  json j;
  for (size_t k = 0; k < 4; ++k) {
    std::vector<double> v;
    for (const auto& c : so.faultCounts) v.push_back(double(c[k]));
    j[kNames[k]] = meanCi95(v).toJson();
  }
  return j;
}

// The fail-stop policy's outcome of the same size, when it ran.
const PolicyOutcome* failStopOf(const SizeOutcome& so) {
  for (const auto& p : so.policies)
    if (p.name == "fail-stop") return &p;
  return nullptr;
}

// GPU-hours lost to link faults that a policy saves against fail-stop, seed by seed: both met the
// same faults, so the interval of the difference is far narrower than those of the two losses.
std::optional<Interval> savedVsFailStop(const SizeOutcome& so, const PolicyOutcome& p) {
  const PolicyOutcome* f = failStopOf(so);
  if (!f) return std::nullopt;
  std::vector<double> d;
  for (size_t k = 0; k < p.gpuHoursLostToLinkFaults.size(); ++k)
    d.push_back(f->gpuHoursLostToLinkFaults[k] - p.gpuHoursLostToLinkFaults[k]);
  return meanCi95(d);
}

json policyJson(const SizeOutcome& so, const PolicyOutcome& p, const Scenario& s) {
  const PolicyParams* pp = findPolicy(s, p.name);
  json runs = json::array();
  for (const auto& r : p.runs) runs.push_back(r.toJson());
  json counts;
  counts["link_faults"] = meanOf(p.runs, &RunStats::linkFaults);
  counts["failovers"] = meanOf(p.runs, &RunStats::failovers);
  counts["failbacks"] = meanOf(p.runs, &RunStats::failbacks);
  counts["ride_throughs"] = meanOf(p.runs, &RunStats::rideThroughs);
  counts["link_aborts"] = meanOf(p.runs, &RunStats::linkAborts);
  counts["other_aborts"] = meanOf(p.runs, &RunStats::otherAborts);
  counts["stall_s"] = meanOf(p.runs, &RunStats::stallS);
  counts["degraded_s"] = meanOf(p.runs, &RunStats::degradedS);
  counts["restart_s"] = meanOf(p.runs, &RunStats::restartS);
  counts["lost_work_s"] = meanOf(p.runs, &RunStats::lostWorkS);
  const auto saved = savedVsFailStop(so, p);
  return {{"name", p.name},
          {"summary", pp ? pp->summary : ""},
          {"effective_time_ratio", meanCi95(p.ratio).toJson()},
          {"gpu_hours_lost", meanCi95(p.gpuHoursLost).toJson()},
          {"gpu_hours_lost_to_link_faults", meanCi95(p.gpuHoursLostToLinkFaults).toJson()},
          {"gpu_hours_saved_vs_fail_stop", saved ? saved->toJson() : json(nullptr)},
          {"wall_s", meanCi95(p.wallS).toJson()},
          {"means", counts},
          {"runs", runs}};
}

}  // namespace

std::string formatTable(const Scenario& s, const RunDescription& d, const std::vector<SizeOutcome>& r) {
  std::ostringstream o;
  const bool work = s.job.workS > 0;
  for (const auto& so : r) {
    Scenario sz = s;
    sz.cluster.gpus = so.gpus;
    const auto& c = sz.cluster;
    o << "# reccl-sim: " << so.gpus << " GPUs = " << c.hosts() << " hosts x " << c.gpusPerHost << " GPUs, "
      << c.nicsPerHost << " NICs each (" << c.links() << " last-hop links"
      << (c.fusedNics ? ", fused in groups of " + std::to_string(c.fusedPorts) : std::string()) << "), "
      << (work ? "until " + num(s.job.workS) + " s of work" : num(s.job.days) + " days") << "\n";
    auto cnt = faultCountsJson(so);
    o << "# seeds " << d.seed << ".." << d.seed + uint64_t(d.seeds) - 1 << " (mean ± 95 % CI over seeds); faults per run: "
      << num(cnt["down"]["mean"].get<double>()) << " down, " << num(cnt["flap"]["mean"].get<double>()) << " flap episodes, "
      << num(cnt["gray"]["mean"].get<double>()) << " gray episodes, " << num(cnt["other"]["mean"].get<double>())
      << " other interruptions" << (d.tracePath.empty() ? "" : " (trace " + d.tracePath + ")") << "; simulated in "
      << fmt("%.3f", so.elapsedS) << " s\n";
    const bool paired = failStopOf(so) != nullptr;
    o << pad("policy", 19) << pad("effective time", 22) << pad("GPU-hours lost", 26) << pad("to link faults", 26)
      << (paired ? pad("saved vs fail-stop", 26) : "") << pad("failovers", 11) << pad("aborts(link)", 13) << pad("stall h", 9) << (work ? "wall s" : "degraded h") << "\n";
    for (const auto& p : so.policies) {
      o << pad(p.name, 19) << pad(interval(meanCi95(p.ratio), "%.5f"), 22) << pad(interval(meanCi95(p.gpuHoursLost)), 26)
        << pad(interval(meanCi95(p.gpuHoursLostToLinkFaults)), 26)
        << (paired ? pad(interval(*savedVsFailStop(so, p)), 26) : "") << pad(num(meanOf(p.runs, &RunStats::failovers)), 11) << pad(num(meanOf(p.runs, &RunStats::linkAborts)), 13)
        << pad(num(meanOf(p.runs, &RunStats::stallS) / 3600), 9)
        << (work ? interval(meanCi95(p.wallS)) : num(meanOf(p.runs, &RunStats::degradedS) / 3600)) << "\n";
    }
  }
  if (r.size() > 1) {
    o << "# GPU-hours lost to link faults per run (mean over seeds)\n" << pad("gpus", 10);
    for (const auto& p : r[0].policies) o << pad(p.name, 19);
    o << "sim s\n";
    for (const auto& so : r) {
      o << pad(std::to_string(so.gpus), 10);
      for (const auto& p : so.policies) o << pad(num(meanCi95(p.gpuHoursLostToLinkFaults).mean), 19);
      o << fmt("%.3f", so.elapsedS) << "\n";
    }
  }
  return o.str();
}

json resultsToJson(const Scenario& s, const RunDescription& d, const std::vector<SizeOutcome>& r) {
  json j;
  j["tool"] = "reccl-sim";
  j["mode"] = s.job.workS > 0 ? "work" : "days";
  j["seed"] = d.seed;
  j["seeds"] = d.seeds;
  j["trace"] = d.tracePath.empty() ? json(nullptr) : json(d.tracePath);
  j["costs"] = d.costsPath.empty() ? json(nullptr) : json(d.costsPath);
  j["scenario"] = scenarioToJson(s);
  json results = json::array();
  double elapsed = 0;
  for (const auto& so : r) {
    Scenario sz = s;
    sz.cluster.gpus = so.gpus;
    json ps = json::array();
    for (const auto& p : so.policies) ps.push_back(policyJson(so, p, s));
    std::vector<double> ffWork, ffWall, refWork, refWall;
    for (const auto& x : so.faultFree) {
      ffWork.push_back(x.workS);
      ffWall.push_back(x.wallS);
    }
    for (const auto& x : so.noLinkFaults) {
      refWork.push_back(x.workS);
      refWall.push_back(x.wallS);
    }
    results.push_back({{"gpus", so.gpus},
                       {"hosts", sz.cluster.hosts()},
                       {"links", sz.cluster.links()},
                       {"elapsed_s", so.elapsedS},
                       {"faults_per_run", faultCountsJson(so)},
                       {"fault_free", {{"work_s", meanCi95(ffWork).toJson()}, {"wall_s", meanCi95(ffWall).toJson()}}},
                       {"no_link_faults", {{"work_s", meanCi95(refWork).toJson()}, {"wall_s", meanCi95(refWall).toJson()}}},
                       {"policies", ps}});
    elapsed += so.elapsedS;
  }
  j["elapsed_s"] = elapsed;
  j["results"] = results;
  if (results.size() == 1) {
    j["gpus"] = results[0]["gpus"];
    j["policies"] = results[0]["policies"];
  }
  return j;
}

}  // namespace reccl::sim
