#include "reccl/sim/fault_sequence.h"

#include <algorithm>
#include <cmath>

#include "json_fields.h"

namespace reccl::sim {

using nlohmann::json;

const char* faultKindName(FaultKind k) noexcept {
  switch (k) {
    case FaultKind::kDown: return "down";
    case FaultKind::kFlap: return "flap";
    case FaultKind::kGray: return "gray";
    case FaultKind::kCrash: return "crash";
  }
  return "?";
}

namespace {
constexpr uint32_t kMaxFlapCount = 10000;
}  // namespace

FaultSequence FaultSequence::drawn(const Scenario& s, uint64_t seed) {
  FaultSequence q;
  q.endless_ = true;
  q.rng_ = Rng(seed);
  q.model_ = s.faults;
  q.hosts_ = s.cluster.hosts();
  q.nics_ = s.cluster.nicsPerHost;
  q.gpus_ = s.cluster.gpus;
  const double links = double(s.cluster.links());
  const double perDay[4] = {links * s.faults.linkFaultsPerLinkDay, links * s.faults.flapsPerLinkDay,
                            links * s.faults.grayPerLinkDay, double(q.gpus_) * s.faults.otherFailuresPerGpuDay};
  const double total = perDay[0] + perDay[1] + perDay[2] + perDay[3];
  q.ratePerS_ = total / 86400.0;
  double acc = 0;
  for (int k = 0; k < 3; ++k) {
    acc += perDay[k];
    q.share_[k] = total > 0 ? acc / total : 0;
  }
  return q;
}

FaultSequence FaultSequence::fixed(std::vector<FaultEvent> events, uint64_t seed) {
  FaultSequence q;
  std::stable_sort(events.begin(), events.end(), [](const FaultEvent& a, const FaultEvent& b) { return a.atS < b.atS; });
  Rng rng(seed);
  for (auto& e : events) {
    e.u = rng.uniform();
    e.u2 = rng.uniform();
  }
  q.events_ = std::move(events);
  return q;
}

void FaultSequence::drawNext() {
  FaultEvent e;
  t_ += rng_.exponential(1.0 / ratePerS_);
  e.atS = t_;
  // A fixed number of draws per fault, whatever its kind.
  double pick = rng_.uniform();
  e.host = uint32_t(std::min<int64_t>(hosts_ - 1, int64_t(rng_.uniform() * double(hosts_))));
  e.nic = uint32_t(std::min<int>(nics_ - 1, int(rng_.uniform() * nics_)));
  double d1 = rng_.uniform(), d2 = rng_.uniform(), d3 = rng_.uniform();
  e.u = rng_.uniform();
  e.u2 = rng_.uniform();
  if (pick < share_[0]) {
    e.kind = FaultKind::kDown;
    e.durationS = model_.repairS.quantile(d1);
  } else if (pick < share_[1]) {
    e.kind = FaultKind::kFlap;
    e.count = uint32_t(std::clamp<double>(std::round(model_.flapCount.quantile(d1)), 1, kMaxFlapCount));
    e.durationS = model_.flapDownS.quantile(d2);
    e.gapS = model_.flapGapS.quantile(d3);
  } else if (pick < share_[2]) {
    e.kind = FaultKind::kGray;
    e.durationS = model_.grayDurationS.quantile(d1);
  } else {
    e.kind = FaultKind::kCrash;
  }
  events_.push_back(e);
}

const FaultEvent* FaultSequence::at(size_t i) {
  while (endless_ && ratePerS_ > 0 && i >= events_.size()) drawNext();
  return i < events_.size() ? &events_[i] : nullptr;
}

Result<std::vector<FaultEvent>> parseTrace(const json& j, const ClusterShape& c) {
  JsonFields top(j, "", "trace");
  if (const json* v = top.get("version"))
    if (*v != 1) top.fail("version", "must be 1");
  const json* list = top.get("faults");
  if (!list && top.ok()) top.fail("faults", "missing");
  if (list && !list->is_array()) top.fail("faults", "must be an array");
  RECCL_TRY(top.finish());

  std::vector<FaultEvent> out;
  for (size_t i = 0; i < list->size(); ++i) {
    JsonFields f((*list)[i], "faults[" + std::to_string(i) + "]");
    FaultEvent e;
    std::string kind;
    f.text("kind", kind);
    if (f.ok() && !f.has("kind")) f.fail("kind", "missing");
    if (kind == "down")
      e.kind = FaultKind::kDown;
    else if (kind == "flap")
      e.kind = FaultKind::kFlap;
    else if (kind == "gray")
      e.kind = FaultKind::kGray;
    else if (kind == "crash")
      e.kind = FaultKind::kCrash;
    else if (f.ok())
      f.fail("kind", "must be \"down\", \"flap\", \"gray\" or \"crash\"");
    if (f.ok() && !f.has("at_s")) f.fail("at_s", "missing");
    f.number("at_s", e.atS, 0, 1e12);
    auto required = [&](const std::string& key) {
      if (f.ok() && !f.has(key)) f.fail(key, std::string("missing (a ") + kind + " names it)");
    };
    if (e.kind != FaultKind::kCrash) {
      required("host");
      required("nic");
      int64_t host = 0, nic = 0;
      f.integer("host", host, 0, c.hosts() - 1);
      f.integer("nic", nic, 0, c.nicsPerHost - 1);
      e.host = uint32_t(host);
      e.nic = uint32_t(nic);
    }
    if (e.kind == FaultKind::kDown || e.kind == FaultKind::kGray) {
      required("duration_s");
      f.number("duration_s", e.durationS, 0, 1e12, true);
    }
    if (e.kind == FaultKind::kFlap) {
      required("down_s");
      required("count");
      f.number("down_s", e.durationS, 0, 1e12, true);
      f.number("gap_s", e.gapS, 0, 1e12);
      int64_t count = 1;
      f.integer("count", count, 1, kMaxFlapCount);
      e.count = uint32_t(count);
    }
    RECCL_TRY(f.finish());
    out.push_back(e);
  }
  return out;
}

}  // namespace reccl::sim
