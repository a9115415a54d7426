#include "reccl/sim/scenario.h"

#include <cmath>
#include <set>

#include "json_fields.h"
#include "library_defaults.h"

namespace reccl::sim {

using nlohmann::json;

namespace {

// Llama 3 (Meta, "The Llama 3 Herd of Models", 2024, table 5): 419 unexpected interruptions in a
// 54-day snapshot of the 405B run on 16,384 GPUs with one NIC per GPU; 35 "network switch/cable"
// and 7 "NIC" are last-hop-link faults, the other 377 interrupt the job whatever the network does.
constexpr double kLlamaGpuDays = 16384.0 * 54.0;
constexpr double kLlamaLinkFaults = 35 + 7;
constexpr double kLlamaOtherFailures = 419 - kLlamaLinkFaults;

// NCCL's RC QP: ack timeout 4.096 us * 2^NCCL_IB_TIMEOUT (default 20), NCCL_IB_RETRY_CNT 7 tries.
constexpr double kNcclRetryS = 4.096e-6 * (1 << 20);
constexpr double kNcclDetectS = kNcclRetryS * 7;
// VCCL's documented NCCL_IB_TIMEOUT=18 with the same 7 tries: its ~7.5 s detection.
constexpr double kVcclRetryS = 4.096e-6 * (1 << 18);
constexpr double kVcclDetectS = kVcclRetryS * 7;

detector::StateMachineParams noDamping(double holdDownS) {
  detector::StateMachineParams p;
  p.holdDownNs = uint64_t(std::llround(holdDownS * 1e9));
  p.damping.penaltyPerFlap = 0;
  return p;
}

// A peer that moves the traffic onto another NIC of the host once it sees the fault (the switch
// itself free), and back a second after the link returns.
PolicyParams backupNic(std::string name, std::string summary, double detectS, double retryS, double bwAfter) {
  PolicyParams p;
  p.name = std::move(name);
  p.summary = std::move(summary);
  p.failover = true;
  p.detectS = detectS;
  p.retryS = retryS;
  p.stallS = Dist::constant(detectS);
  p.bwAfter = bwAfter;
  p.failBack = true;
  p.linkState = noDamping(1.0);
  p.failBackStallS = Dist::constant(0);
  return p;
}

std::vector<PolicyParams> builtinPolicies() {
  std::vector<PolicyParams> out;
  PolicyParams p;
  p.name = "fail-stop";
  p.summary = "stock NCCL: RC retries run out (~30 s), the job aborts and restarts from its checkpoint";
  p.detectS = kNcclDetectS;
  p.retryS = kNcclRetryS;
  p.stallS = Dist::constant(kNcclDetectS);
  out.push_back(p);

  p = {};
  p.name = "completion-timer";
  p.summary = "NCCL port failover: acts on completion errors (~30 s), only between ports fused into one NIC";
  p.failover = true;
  p.scope = Scope::kFused;
  p.detectS = kNcclDetectS;
  p.retryS = kNcclRetryS;
  p.stallS = Dist::constant(kNcclDetectS);
  p.failBack = true;
  p.linkState = noDamping(0.2);
  p.failBackStallS = Dist::constant(0);
  out.push_back(p);

  out.push_back(backupNic("vccl", "VCCL-like backup QP on another NIC: IB timeout ~7.5 s, 76.6 % bandwidth after",
                           kVcclDetectS, kVcclRetryS, 0.766));
  out.push_back(backupNic("r2ccl", "R2CCL-like rollback onto a backup NIC: detection in seconds, 85-93 % bandwidth after",
                           2.0, kNcclRetryS, 0.89));

  // docs/benchmarks.md, failover under last-hop faults, BPF detector (2026-11-29): fault -> first
  // signal p50 0.12 ms, stall p50 13.9 ms, p99 320 ms. --costs replaces these with a run's own.
  p = {};
  p.name = "reccl";
  p.summary = "reccl: kernel link events, lossless migration, rebalanced rails, fail-back after hold-down";
  p.failover = true;
  p.detectS = 0.00012;
  p.stallS = Dist::logNormal(0.0139, 0.320);
  p.failBack = true;
  p.linkState = libraryLinkState();  // params.def: hold-down, flap damping
  p.failBackStallS = p.stallS;
  // The retransmit window (RECCL_RETRANS_WINDOW_MS, 500 ms) and at most one report a second.
  p.grayDetectS = 1.0;
  p.grayClearS = double(libraryDefault("RECCL_DEGRADED_CLEAR_MS")) / 1e3;
  out.push_back(p);

  p.name = "reccl-no-failback";
  p.summary = "reccl without fail-back: traffic stays on the alternate rails until the job restarts";
  p.failBack = false;
  out.push_back(p);
  return out;
}

const char* scopeName(Scope s) { return s == Scope::kFused ? "fused" : "host"; }

Status applyPolicy(JsonFields& f, PolicyParams& p) {
  f.text("summary", p.summary);
  f.boolean("failover", p.failover);
  if (const json* s = f.get("scope")) {
    if (*s == "host")
      p.scope = Scope::kHost;
    else if (*s == "fused")
      p.scope = Scope::kFused;
    else
      f.fail("scope", "must be \"host\" or \"fused\"");
  }
  f.number("detect_s", p.detectS, 0, 86400);
  f.number("retry_s", p.retryS, 0, 86400);
  f.dist("stall_s", p.stallS);
  if (const json* b = f.get("bw_after")) {
    if (*b == "rebalanced")
      p.bwAfter = -1;
    else if (b->is_number() && b->get<double>() > 0 && b->get<double>() <= 1)
      p.bwAfter = b->get<double>();
    else
      f.fail("bw_after", "must be a number in (0, 1] or \"rebalanced\"");
  }
  f.boolean("fail_back", p.failBack);
  double hold = double(p.linkState.holdDownNs) / 1e9;
  f.number("holddown_s", hold, 0, 86400);
  p.linkState.holdDownNs = uint64_t(std::llround(hold * 1e9));
  if (const json* d = f.get("damping")) {
    JsonFields g(*d, f.path("damping"));
    auto& dp = p.linkState.damping;
    double half = double(dp.halfLifeNs) / 1e9;
    g.number("penalty", dp.penaltyPerFlap, 0, 1e9);
    g.number("suppress", dp.suppressThreshold, 0, 1e9);
    g.number("reuse", dp.reuseThreshold, 0, 1e9);
    g.number("max", dp.maxPenalty, 0, 1e9);
    g.number("half_life_s", half, 0, 86400, true);
    dp.halfLifeNs = uint64_t(std::llround(half * 1e9));
    RECCL_TRY(g.finish());
    if (dp.reuseThreshold > dp.suppressThreshold) return {Errc::kInvalidArgument, g.path("reuse") + ": must not exceed suppress"};
    if (dp.maxPenalty < dp.suppressThreshold) return {Errc::kInvalidArgument, g.path("max") + ": must be at least suppress"};
  }
  f.dist("fail_back_stall_s", p.failBackStallS);
  f.dist("fail_back_delay_s", p.failBackDelayS);
  if (const json* g = f.get("gray_detect_s")) {
    if (g->is_null())
      p.grayDetectS.reset();
    else if (g->is_number() && g->get<double>() >= 0 && std::isfinite(g->get<double>()))
      p.grayDetectS = g->get<double>();
    else
      f.fail("gray_detect_s", "must be a number >= 0, or null (gray loss not seen)");
  }
  f.number("gray_clear_s", p.grayClearS, 0, 86400);
  return f.finish();
}

}  // namespace

Scenario defaultScenario() {
  Scenario s;
  auto& f = s.faults;
  f.linkFaultsPerLinkDay = kLlamaLinkFaults / kLlamaGpuDays;
  f.repairS = Dist::logNormal(2 * 3600.0, 72 * 3600.0);
  f.flapsPerLinkDay = f.linkFaultsPerLinkDay;
  f.flapCount = Dist::logNormal(3, 30);
  f.flapDownS = Dist::logNormal(0.5, 10);
  f.flapGapS = Dist::logNormal(5, 120);
  f.grayPerLinkDay = f.linkFaultsPerLinkDay;
  f.grayDurationS = Dist::logNormal(600, 6 * 3600.0);
  f.otherFailuresPerGpuDay = kLlamaOtherFailures / kLlamaGpuDays;
  s.policies = builtinPolicies();
  return s;
}

Result<Scenario> applyScenarioJson(const json& j, Scenario s) {
  JsonFields top(j, "");
  if (const json* v = top.get("version"))
    if (*v != 1) top.fail("version", "must be 1");
  if (const json* c = top.get("cluster")) {
    JsonFields f(*c, "cluster");
    f.integer("gpus", s.cluster.gpus, 1, 100'000'000);
    f.integer("gpus_per_host", s.cluster.gpusPerHost, 1, 1024);
    f.integer("nics_per_host", s.cluster.nicsPerHost, 1, 64);
    f.boolean("fused_nics", s.cluster.fusedNics);
    f.integer("fused_ports", s.cluster.fusedPorts, 2, 64);
    RECCL_TRY(f.finish());
  }
  if (const json* c = top.get("job")) {
    JsonFields f(*c, "job");
    f.number("days", s.job.days, 0, 36500, true);
    f.number("work_s", s.job.workS, 0, 1e12);
    f.number("comm_share", s.job.commShare, 0, 1);
    f.number("checkpoint_interval_s", s.job.checkpointIntervalS, 0, 1e9, true);
    f.number("checkpoint_cost_s", s.job.checkpointCostS, 0, 1e9);
    f.number("restart_s", s.job.restartS, 0, 1e9);
    RECCL_TRY(f.finish());
  }
  if (const json* c = top.get("faults")) {
    JsonFields f(*c, "faults");
    auto& m = s.faults;
    f.number("link_faults_per_link_day", m.linkFaultsPerLinkDay, 0, 1e3);
    f.dist("repair_s", m.repairS);
    f.number("flaps_per_link_day", m.flapsPerLinkDay, 0, 1e3);
    f.dist("flap_count", m.flapCount);
    f.dist("flap_down_s", m.flapDownS);
    f.dist("flap_gap_s", m.flapGapS);
    f.number("gray_per_link_day", m.grayPerLinkDay, 0, 1e3);
    f.dist("gray_duration_s", m.grayDurationS);
    f.number("gray_bandwidth", m.grayBandwidth, 0, 1, true);
    f.number("other_failures_per_gpu_day", m.otherFailuresPerGpuDay, 0, 1e3);
    RECCL_TRY(f.finish());
  }
  if (const json* c = top.get("policies")) {
    if (!c->is_object()) return Status{Errc::kInvalidArgument, "policies: must be an object of policies by name"};
    for (auto it = c->begin(); it != c->end(); ++it) {
      JsonFields f(it.value(), "policies." + it.key());
      PolicyParams* p = nullptr;
      for (auto& q : s.policies)
        if (q.name == it.key()) p = &q;
      std::string base;
      f.text("base", base);
      if (!p) {
        const PolicyParams* b = findPolicy(s, base);
        if (base.empty())
          f.fail("base", "missing: a new policy starts from an existing one (\"base\": \"reccl\")");
        else if (!b)
          f.fail("base", "no policy \"" + base + "\"");
        if (!f.ok()) return f.finish();
        PolicyParams copy = *b;
        copy.name = it.key();
        copy.base = base;
        s.policies.push_back(copy);
        p = &s.policies.back();
      } else if (!base.empty() && base != p->base) {
        f.fail("base", p->base.empty() ? "only a new policy has a base" : "is \"" + p->base + "\" already");
      }
      RECCL_TRY(applyPolicy(f, *p));
    }
  }
  RECCL_TRY(top.finish());
  return s;
}

Status validateScenario(const Scenario& s) {
  auto bad = [](const std::string& what) { return Status{Errc::kInvalidArgument, what}; };
  const auto& c = s.cluster;
  if (c.gpus < 1) return bad("cluster.gpus: must be >= 1");
  if (c.nicsPerHost < 1 || c.nicsPerHost > 64) return bad("cluster.nics_per_host: must be in [1, 64]");
  if (c.fusedNics && (c.fusedPorts < 2 || c.nicsPerHost % c.fusedPorts != 0))
    return bad("cluster.fused_ports: must be >= 2 and divide nics_per_host (" + std::to_string(c.nicsPerHost) + ")");
  if (s.job.workS <= 0 && !(s.job.days > 0)) return bad("job.days: must be > 0");
  if (c.hosts() > (int64_t(1) << 32)) return bad("cluster.gpus: more than 2^32 hosts");
  if (s.policies.empty()) return bad("policies: none to run");
  std::set<std::string> names;
  for (const auto& p : s.policies) {
    if (p.name.empty()) return bad("policies: a policy without a name");
    if (!names.insert(p.name).second) return bad("policies." + p.name + ": listed twice");
  }
  return {};
}

double groupSize(const PolicyParams& p, const ClusterShape& c) {
  return p.scope == Scope::kFused ? double(c.fusedPorts) : double(c.nicsPerHost);
}

double resolvedBwAfter(const PolicyParams& p, const ClusterShape& c) {
  if (p.bwAfter > 0) return p.bwAfter;
  double g = groupSize(p, c);
  return g > 1 ? (g - 1) / g : 1.0;
}

const PolicyParams* findPolicy(const Scenario& s, const std::string& name) {
  for (const auto& p : s.policies)
    if (p.name == name) return &p;
  return nullptr;
}

json scenarioToJson(const Scenario& s) {
  json j;
  j["version"] = 1;
  j["cluster"] = {{"gpus", s.cluster.gpus},           {"gpus_per_host", s.cluster.gpusPerHost},
                  {"nics_per_host", s.cluster.nicsPerHost}, {"fused_nics", s.cluster.fusedNics},
                  {"fused_ports", s.cluster.fusedPorts}};
  j["job"] = {{"days", s.job.days},
              {"work_s", s.job.workS},
              {"comm_share", s.job.commShare},
              {"checkpoint_interval_s", s.job.checkpointIntervalS},
              {"checkpoint_cost_s", s.job.checkpointCostS},
              {"restart_s", s.job.restartS}};
  const auto& f = s.faults;
  j["faults"] = {{"link_faults_per_link_day", f.linkFaultsPerLinkDay},
                 {"repair_s", f.repairS.toJson()},
                 {"flaps_per_link_day", f.flapsPerLinkDay},
                 {"flap_count", f.flapCount.toJson()},
                 {"flap_down_s", f.flapDownS.toJson()},
                 {"flap_gap_s", f.flapGapS.toJson()},
                 {"gray_per_link_day", f.grayPerLinkDay},
                 {"gray_duration_s", f.grayDurationS.toJson()},
                 {"gray_bandwidth", f.grayBandwidth},
                 {"other_failures_per_gpu_day", f.otherFailuresPerGpuDay}};
  json ps = json::object();
  for (const auto& p : s.policies) {
    const auto& d = p.linkState.damping;
    json& q = ps[p.name];
    if (!p.base.empty()) q["base"] = p.base;
    q.update(json{{"summary", p.summary},
                  {"failover", p.failover},
                  {"scope", scopeName(p.scope)},
                  {"detect_s", p.detectS},
                  {"retry_s", p.retryS},
                  {"stall_s", p.stallS.toJson()},
                  {"bw_after", p.bwAfter > 0 ? json(p.bwAfter) : json("rebalanced")},
                  {"fail_back", p.failBack},
                  {"holddown_s", double(p.linkState.holdDownNs) / 1e9},
                  {"damping",
                   {{"penalty", d.penaltyPerFlap},
                    {"suppress", d.suppressThreshold},
                    {"reuse", d.reuseThreshold},
                    {"max", d.maxPenalty},
                    {"half_life_s", double(d.halfLifeNs) / 1e9}}},
                  {"fail_back_stall_s", p.failBackStallS.toJson()},
                  {"fail_back_delay_s", p.failBackDelayS.toJson()},
                  {"gray_detect_s", p.grayDetectS ? json(*p.grayDetectS) : json(nullptr)},
                  {"gray_clear_s", p.grayClearS}});
  }
  j["policies"] = ps;
  return j;
}

}  // namespace reccl::sim
