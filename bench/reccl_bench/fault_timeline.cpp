#include "fault_timeline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace reccl::bench {
namespace {

using nlohmann::json;

json orNull(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::optional<double> median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  return percentile(std::move(v), 0.5);
}

double ms(int64_t ns) { return double(ns) / 1e6; }

// p50 / p99 / max / n of a list of values.
json spread(const std::vector<double>& v) {
  if (v.empty()) return {{"n", 0}, {"p50", nullptr}, {"p99", nullptr}, {"max", nullptr}};
  return {{"n", v.size()}, {"p50", percentile(v, 0.5)}, {"p99", percentile(v, 0.99)}, {"max", percentile(v, 1.0)}};
}

}  // namespace

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = size_t(std::ceil(p * double(v.size())));
  if (rank == 0) rank = 1;
  return v[std::min(rank, v.size()) - 1];
}

json analyzeFaults(const std::vector<IterationSample>& s, const std::vector<FaultMoment>& faults, int64_t t0Ns) {
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  json out = json::array();
  std::vector<double> stalls, stallsInColl, firstSteps, detects, switches, resumes;
  std::vector<double> before, during, degraded, after;
  int withFailover = 0;
  // Where the previous fault's "after" window began (its fail-back done): the next "before"
  // window starts there, so no iteration is counted in two windows.
  int64_t lower = t0Ns;
  for (size_t k = 0; k < faults.size(); ++k) {
    const FaultMoment& f = faults[k];
    const int64_t F = f.faultNs;
    const int64_t W = k + 1 < faults.size() ? faults[k + 1].faultNs : kNever;
    const int64_t R = f.recoverNs >= 0 && f.recoverNs < W ? f.recoverNs : -1;

    // Counters as they stood before the fault.
    uint64_t fo0 = 0, sig0 = 0, fb0 = 0;
    for (const auto& x : s)
      if (x.statsNs < F) {
        fo0 = x.failovers;
        sig0 = x.signalNs;
        fb0 = x.failbacks;
      }
    size_t li = s.size();  // the iteration the fault landed in (or the first after it)
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i].endNs >= F) {
        li = i;
        break;
      }
    json j = {{"index", k}, {"action", f.action}, {"target", f.target}, {"at_s", double(F - t0Ns) / 1e9},
              {"recover_at_s", R >= 0 ? json(double(R - t0Ns) / 1e9) : json(nullptr)}};
    j["in_collective"] = li < s.size() && s[li].startNs <= F;

    // First step: the first first-step stamp after the fault, seen before the next fault. (A
    // fault between two calls may already be migrated, and stamped by the small agreeing
    // allreduce, in the counters of the iteration that ended before it.)
    std::optional<int64_t> firstStepEnd;
    size_t si = s.size();
    size_t first = 0;
    while (first < s.size() && s[first].statsNs < F) ++first;
    for (size_t i = first; i < s.size() && s[i].endNs < W; ++i)
      if (int64_t(s[i].firstStepNs) > F && int64_t(s[i].firstStepNs) < W) {
        firstStepEnd = int64_t(s[i].firstStepNs);
        si = i;
        break;
      }
    // The failover's own counters: the first sample from there on (before the next fault) whose
    // failover count moved. The stamp may be in a sample taken before the count moved: the port
    // stamps its first step as soon as the new path carries one, the count follows the commit's
    // log line.
    size_t ci = s.size();
    if (si < s.size())
      for (size_t i = si; i < s.size() && s[i].endNs < W; ++i)
        if (s[i].failovers > fo0) {
          ci = i;
          break;
        }
    bool failover = ci < s.size();
    j["failover"] = failover;
    // Connections still away from the fault's rail (an earlier fault's fail-back not done yet,
    // e.g. held down or damped): a fault with nothing on the rail has nothing to move.
    j["fail_back_pending"] = fo0 > fb0;
    // Stall end: the latest resume stamp of this fault's moves (fail-backs do not stamp), after
    // the fault and before its recovery; or, for a failover that came only after the recovery,
    // before the next fault. (Moves off a gray rail after the recovery stamp too: they are not
    // this fault's.) The stamps are running maxima, so the largest one in that span is the last
    // connection's.
    std::optional<int64_t> resumeEnd;
    const int64_t bound = R >= 0 && firstStepEnd && *firstStepEnd < R ? R : W;
    for (size_t i = first; i < s.size() && s[i].endNs < W; ++i)
      if (int64_t(s[i].resumeNs) > F && int64_t(s[i].resumeNs) < bound)
        resumeEnd = std::max(resumeEnd.value_or(0), int64_t(s[i].resumeNs));
    std::optional<double> stall, firstStep, detect, sw;
    if (firstStepEnd && failover) {
      ++withFailover;
      firstStep = ms(*firstStepEnd - F);
      firstSteps.push_back(*firstStep);
      // A library without the resume stamp: the first step is the stall.
      stall = resumeEnd ? ms(*resumeEnd - F) : *firstStep;
      stalls.push_back(*stall);
      if (j["in_collective"].get<bool>()) stallsInColl.push_back(*stall);
      // The signal and commit stamps come with the initiator's count; the passive end may have
      // counted its side first: the first sample (before the next fault) whose signal moved.
      size_t gi = s.size();
      for (size_t i = si; i < s.size() && s[i].endNs < W; ++i)
        if (s[i].signalNs != sig0 && s[i].signalNs && s[i].commitNs >= s[i].signalNs) {
          gi = i;
          break;
        }
      if (gi < s.size()) {
        // Signed: the in-band stall source dates its signal to the last ACK, before the fault.
        detect = ms(int64_t(s[gi].signalNs) - F);
        sw = ms(int64_t(s[gi].commitNs - s[gi].signalNs));
        detects.push_back(*detect);
        switches.push_back(*sw);
        resumes.push_back(*stall - *detect - *sw);
      }
    }
    j["stall_ms"] = orNull(stall);
    j["first_step_ms"] = orNull(firstStep);
    j["signal_after_fault_ms"] = orNull(detect);
    j["fault_to_switch_ms"] = orNull(sw);
    j["resume_after_switch_ms"] = stall && detect ? json(*stall - *detect - *sw) : json(nullptr);

    std::vector<double> b, d, g, a;
    for (const auto& x : s)
      if (x.startNs >= lower && x.endNs < F) b.push_back(x.busBw);
    for (size_t i = li; i < s.size() && i <= std::max(li, si == s.size() ? li : si) && s[i].endNs < W; ++i)
      d.push_back(s[i].busBw);
    const int64_t degradedEnd = R >= 0 ? R : W;
    // Degraded: whole calls after the first one that used a migrated path.
    if (firstStepEnd)
      for (const auto& x : s)
        if (x.startNs >= *firstStepEnd && x.endNs < degradedEnd) g.push_back(x.busBw);
    // Fail-back done: the end of the first iteration after the recovery whose counter moved.
    int64_t back = -1;
    if (R >= 0) {
      uint64_t fbAtRecovery = 0;
      for (const auto& x : s)
        if (x.statsNs < R) fbAtRecovery = x.failbacks;
      for (const auto& x : s)
        if (x.endNs > R && x.endNs < W && x.failbacks > fbAtRecovery) {
          back = x.endNs;
          break;
        }
      if (back >= 0)
        for (const auto& x : s)
          if (x.startNs >= back && x.endNs < W) a.push_back(x.busBw);
    }
    j["failed_back_at_s"] = back >= 0 ? json(double(back - t0Ns) / 1e9) : json(nullptr);
    j["busbw_before_gbps"] = orNull(median(b));
    j["busbw_during_gbps"] = d.empty() ? json(nullptr) : json(*std::min_element(d.begin(), d.end()));
    j["busbw_degraded_gbps"] = orNull(median(g));
    j["busbw_after_gbps"] = orNull(median(a));
    j["iterations_before_degraded_after"] = {b.size(), g.size(), a.size()};
    before.insert(before.end(), b.begin(), b.end());
    if (!d.empty()) during.push_back(*std::min_element(d.begin(), d.end()));
    degraded.insert(degraded.end(), g.begin(), g.end());
    after.insert(after.end(), a.begin(), a.end());
    out.push_back(std::move(j));
    lower = back >= 0 ? back : std::max({lower, R, firstStepEnd.value_or(F)});
  }

  json sum;
  sum["faults"] = faults.size();
  sum["faults_with_failover"] = withFailover;
  sum["stall_ms"] = spread(stalls);
  sum["stall_ms_fault_inside_a_call"] = spread(stallsInColl);
  sum["first_step_ms"] = spread(firstSteps);
  sum["signal_after_fault_ms"] = spread(detects);
  sum["fault_to_switch_ms"] = spread(switches);
  sum["resume_after_switch_ms"] = spread(resumes);
  auto mb = median(before), md = median(during), mg = median(degraded), ma = median(after);
  sum["busbw_gbps"] = {{"before", orNull(mb)}, {"during", orNull(md)}, {"degraded", orNull(mg)}, {"after", orNull(ma)}};
  sum["ratios"] = {{"degraded_over_before", mb && mg && *mb > 0 ? json(*mg / *mb) : json(nullptr)},
                   {"after_over_before", mb && ma && *mb > 0 ? json(*ma / *mb) : json(nullptr)},
                   {"during_over_before", mb && md && *mb > 0 ? json(*md / *mb) : json(nullptr)}};
  return {{"faults", out}, {"summary", sum}};
}

uint64_t stampAsAge(uint64_t stampNs, uint64_t nowNs) {
  if (!stampNs) return 0;
  return UINT64_MAX - (nowNs > stampNs ? nowNs - stampNs : 0);  // a stamp after `now`: age 0
}

uint64_t stampFromAge(uint64_t agreed, uint64_t nowNs) {
  if (!agreed) return 0;
  const uint64_t age = UINT64_MAX - agreed;
  return age < nowNs ? nowNs - age : 1;  // older than this host's boot: its earliest moment
}

}  // namespace reccl::bench
