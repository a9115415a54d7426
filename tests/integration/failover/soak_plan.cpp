#include "soak_plan.h"

#include <cstdio>
#include <random>

namespace reccl::test::soak {

const char* faultKindName(FaultKind k) noexcept {
  switch (k) {
    case FaultKind::kHostLink: return "host-link";
    case FaultKind::kSwitchLink: return "switch-link";
    case FaultKind::kCarrierShort: return "carrier-short";
    case FaultKind::kCarrierHeld: return "carrier-held";
    case FaultKind::kFlap: return "flap";
    case FaultKind::kGray: return "gray";
  }
  return "?";
}

const char* flapViaName(FlapVia v) noexcept {
  switch (v) {
    case FlapVia::kHostAdmin: return "host";
    case FlapVia::kSwitchAdmin: return "switch";
    case FlapVia::kCarrier: return "carrier";
  }
  return "?";
}

namespace {

bool needsTap(FaultKind k) { return k == FaultKind::kCarrierShort || k == FaultKind::kCarrierHeld; }

std::vector<FaultKind> kindsOf(const SoakShape& shape) {
  if (!shape.kinds.empty()) return shape.kinds;
  std::vector<FaultKind> all;
  for (int k = 0; k < kNumFaultKinds; ++k)
    if (shape.tapNics || !needsTap(static_cast<FaultKind>(k))) all.push_back(static_cast<FaultKind>(k));
  return all;
}

// Uniform in [lo, hi] from the plan's one generator (so the plan is a function of the seed).
int draw(std::mt19937_64& rng, int lo, int hi) {
  return lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

}  // namespace

std::string checkSoak(const SoakShape& shape, const SoakSpec& spec) {
  if (shape.hosts < 2) return "hosts: at least 2 (a fault needs a peer host to fail over to)";
  if (shape.rails < 2) return "rails: at least 2 (every fault must leave a rail up)";
  if (shape.ranksPerHost < 1) return "ranks per host: at least 1";
  if (spec.faults < 1) return "faults: at least 1";
  if (spec.killEvery < 0) return "kill-every: 0 (no kills) or more";
  for (FaultKind k : shape.kinds)
    if (needsTap(k) && !shape.tapNics) return std::string("kinds: ") + faultKindName(k) + " needs tap NICs";
  return "";
}

std::vector<FaultStep> planSoak(const SoakShape& shape, const SoakSpec& spec) {
  // Three streams: the faults do not depend on the kills or the count, so a shorter run
  // (--faults M) plays the same faults up to its first kill, and a run without kills the same
  // faults throughout, on other rails after the first kill (a kill ends a phase).
  std::seed_seq faultSeed{spec.seed, uint64_t{1}}, killSeed{spec.seed, uint64_t{2}}, phaseSeed{spec.seed, uint64_t{3}};
  std::mt19937_64 rng(faultSeed), killRng(killSeed), phaseRng(phaseSeed);
  const std::vector<FaultKind> kinds = kindsOf(shape);
  const int ranks = shape.hosts * shape.ranksPerHost;
  auto nextKillAfter = [&](int from) {
    return spec.killEvery > 0 ? from + draw(killRng, (spec.killEvery + 1) / 2, spec.killEvery * 3 / 2) : -1;
  };
  std::vector<FaultStep> plan;
  plan.reserve(static_cast<size_t>(spec.faults));
  int killAt = nextKillAfter(0);  // kill after the fault with this 1-based count
  int phaseLeft = 0, rail = 0;
  for (int i = 0; i < spec.faults; ++i) {
    if (phaseLeft == 0) {
      rail = draw(phaseRng, 0, shape.rails - 1);
      phaseLeft = draw(phaseRng, 3, 10);
    }
    FaultStep s;
    s.index = i;
    s.kind = kinds[static_cast<size_t>(draw(rng, 0, static_cast<int>(kinds.size()) - 1))];
    s.host = draw(rng, 0, shape.hosts - 1);
    s.rail = rail;
    s.gapMs = draw(rng, 20, 300);
    switch (s.kind) {
      case FaultKind::kHostLink:
      case FaultKind::kSwitchLink: s.durationMs = draw(rng, 100, 1500); break;
      case FaultKind::kCarrierShort: s.durationMs = draw(rng, 50, 300); break;
      case FaultKind::kCarrierHeld: s.durationMs = draw(rng, 1000, 3000); break;
      case FaultKind::kFlap:
        s.flapVia = static_cast<FlapVia>(draw(rng, 0, shape.tapNics ? 2 : 1));
        s.flapCycles = draw(rng, 2, 5);
        s.flapPeriodMs = draw(rng, 10, 40);
        s.durationMs = s.flapCycles * s.flapPeriodMs;
        break;
      case FaultKind::kGray:
        s.dropRate = draw(rng, 1, 5) / 100.0;
        s.durationMs = draw(rng, 1000, 4000);
        break;
    }
    --phaseLeft;
    if (i + 1 == killAt) {
      s.killRank = draw(killRng, 0, ranks - 1);
      s.killWhileFaulted = draw(killRng, 0, 1) == 1;
      phaseLeft = 0;  // a new job starts a new phase
      killAt = nextKillAfter(killAt);
    }
    s.lastOfPhase = phaseLeft == 0 || i + 1 == spec.faults;
    plan.push_back(s);
  }
  return plan;
}

std::string describe(const FaultStep& s) {
  char buf[160];
  int n = snprintf(buf, sizeof(buf), "#%d %s h%d rail%d %d ms", s.index, faultKindName(s.kind), s.host, s.rail,
                   s.durationMs);
  if (s.kind == FaultKind::kFlap)
    n += snprintf(buf + n, sizeof(buf) - static_cast<size_t>(n), " (%d cycles of %d ms, %s)", s.flapCycles,
                  s.flapPeriodMs, flapViaName(s.flapVia));
  if (s.kind == FaultKind::kGray)
    n += snprintf(buf + n, sizeof(buf) - static_cast<size_t>(n), " (drop %.0f %%)", s.dropRate * 100);
  if (s.killRank >= 0)
    snprintf(buf + n, sizeof(buf) - static_cast<size_t>(n), ", then kill rank %d %s", s.killRank,
             s.killWhileFaulted ? "while faulted" : "after the drain");
  return buf;
}

}  // namespace reccl::test::soak
