#include "reccl/sim/simulate.h"

#include <chrono>
#include <cmath>

#include "reccl/sim/dist.h"

namespace reccl::sim {

using nlohmann::json;

json Interval::toJson() const {
  return {{"mean", mean}, {"ci95", half ? json(*half) : json(nullptr)}, {"n", n}};
}

Interval meanCi95(const std::vector<double>& v) {
  Interval r;
  r.n = int(v.size());
  if (v.empty()) return r;
  double sum = 0;
  for (double x : v) sum += x;
  r.mean = sum / double(v.size());
  if (v.size() < 2) return r;
  double ss = 0;
  for (double x : v) ss += (x - r.mean) * (x - r.mean);
  double sd = std::sqrt(ss / double(v.size() - 1));
  r.half = studentT975(int(v.size()) - 1) * sd / std::sqrt(double(v.size()));
  return r;
}

namespace {

std::array<int64_t, 4> countFaults(FaultSequence& seq, double until) {
  std::array<int64_t, 4> c{};
  for (size_t i = 0;; ++i) {
    const FaultEvent* e = seq.at(i);
    if (!e || e->atS >= until) break;
    c[size_t(e->kind)]++;
  }
  return c;
}

}  // namespace

Result<std::vector<SizeOutcome>> simulate(const Scenario& base, const SimOptions& o) {
  std::vector<const PolicyParams*> chosen;
  if (o.policies.empty())
    for (const auto& p : base.policies) chosen.push_back(&p);
  for (const auto& name : o.policies) {
    const PolicyParams* p = findPolicy(base, name);
    if (!p) return Status{Errc::kInvalidArgument, "--policies: no policy \"" + name + "\""};
    chosen.push_back(p);
  }
  if (o.seeds < 1) return Status{Errc::kInvalidArgument, "--seeds: must be >= 1"};
  std::vector<int64_t> sizes = o.gpuSizes;
  if (sizes.empty()) sizes.push_back(base.cluster.gpus);

  const size_t total = sizes.size() * size_t(o.seeds) * (chosen.size() + 2);
  size_t done = 0;
  auto tick = [&] {
    ++done;
    if (o.progress) o.progress(done, total);
  };
  std::vector<SizeOutcome> out;
  for (int64_t gpus : sizes) {
    Scenario s = base;
    s.cluster.gpus = gpus;
    RECCL_TRY(validateScenario(s));
    const Stop stop = Stop::of(s.job);
    const bool workMode = stop.workS > 0;
    const double gpuH = double(gpus) / 3600.0;
    SizeOutcome so;
    so.gpus = gpus;
    for (const auto* p : chosen) so.policies.push_back(PolicyOutcome{p->name, {}, {}, {}, {}, {}});
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < o.seeds; ++k) {
      const uint64_t seed = o.seed + uint64_t(k);
      FaultSequence seq = o.trace ? FaultSequence::fixed(*o.trace, seed) : FaultSequence::drawn(s, seed);
      FaultSequence none = FaultSequence::none();
      RunStats ff = replay(s, nullptr, none, stop);
      tick();
      RunStats ref = replay(s, nullptr, seq, stop);
      tick();
      double end = std::max(ff.wallS, ref.wallS);
      for (size_t i = 0; i < chosen.size(); ++i) {
        RunStats r = replay(s, chosen[i], seq, stop);
        tick();
        auto& po = so.policies[i];
        end = std::max(end, r.wallS);
        if (workMode) {
          po.ratio.push_back(ff.wallS / r.wallS);
          po.gpuHoursLost.push_back((r.wallS - ff.wallS) * gpuH);
          po.gpuHoursLostToLinkFaults.push_back((r.wallS - ref.wallS) * gpuH);
        } else {
          po.ratio.push_back(r.workS / ff.workS);
          po.gpuHoursLost.push_back((ff.workS - r.workS) * gpuH);
          po.gpuHoursLostToLinkFaults.push_back((ref.workS - r.workS) * gpuH);
        }
        po.wallS.push_back(r.wallS);
        po.runs.push_back(r);
      }
      so.faultFree.push_back(ff);
      so.noLinkFaults.push_back(ref);
      so.faultCounts.push_back(countFaults(seq, end));
    }
    so.elapsedS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.push_back(std::move(so));
  }
  return out;
}

}  // namespace reccl::sim
