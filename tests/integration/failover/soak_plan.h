// The fault plan of the mixed-fault soak, drawn from a seed: which fault, where, for how long, and
// after which faults a rank is killed. Pure: the same seed gives the same plan whatever the
// machine's timing, so a failed run is replayed by its seed. The runner (soak_runner.h) plays it.
//
// Faults come in phases: every fault of a phase is on one rail index (any host, either end of
// the cable), and the runner starts the next phase only once every fault has ended and every
// rank reports all its rails up again. So whatever overlaps, every pair of hosts keeps one rail
// that is up at both: every fault is survivable, and any error or wrong result is a failure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace reccl::test::soak {

enum class FaultKind {
  kHostLink,      // the host NIC admin down, then up
  kSwitchLink,    // the switch port (far end of the cable) admin down, then up
  kCarrierShort,  // tap NIC carrier off for 50-300 ms (TUNSETCARRIER: the driver's path)
  kCarrierHeld,   // tap NIC carrier off for 1-3 s
  kFlap,          // a burst of down/up cycles 10-40 ms apart, by host admin, switch admin or carrier
  kGray,          // 1-5 % of the packets crossing the cable dropped at the switch port for 1-4 s
};
inline constexpr int kNumFaultKinds = 6;
const char* faultKindName(FaultKind k) noexcept;  // "host-link", "switch-link", ...

// How a flap toggles its cable.
enum class FlapVia { kHostAdmin, kSwitchAdmin, kCarrier };
const char* flapViaName(FlapVia v) noexcept;

struct SoakShape {
  int hosts = 3;
  int rails = 2;
  int ranksPerHost = 2;
  bool tapNics = true;           // carrier faults (and carrier flaps) need tap NICs
  std::vector<FaultKind> kinds;  // drawn with equal weight; empty: every kind the NICs allow
};

struct SoakSpec {
  uint64_t seed = 0;
  int faults = 0;
  // A rank is killed after every killEvery faults on average (drawn in [killEvery/2,
  // 3*killEvery/2]); 0: never.
  int killEvery = 0;
};

struct FaultStep {
  int index = 0;  // 0-based
  FaultKind kind = FaultKind::kHostLink;
  int host = 0;
  int rail = 0;
  int gapMs = 0;       // from the previous fault's start (the runner may start it later, never sooner)
  int durationMs = 0;  // how long the cable is faulted; a flap: cycles * periodMs
  FlapVia flapVia = FlapVia::kHostAdmin;
  int flapCycles = 0;  // down/up cycles
  int flapPeriodMs = 0;
  double dropRate = 0;       // gray
  bool lastOfPhase = false;  // the runner drains after it: every fault over, every rail back up
  // A kill after this fault: the rank to SIGKILL, and whether it dies while this fault is still
  // on (right after applying it) or after the phase drained.
  int killRank = -1;
  bool killWhileFaulted = false;
};

// Checks the shape and spec; "" when fine, else what is wrong (naming the field).
std::string checkSoak(const SoakShape& shape, const SoakSpec& spec);

// The whole plan: spec.faults steps. A kill always ends a phase. Precondition: checkSoak == "".
std::vector<FaultStep> planSoak(const SoakShape& shape, const SoakSpec& spec);

// One line for logs and failure messages: "#12 carrier-short h1 rail0 180 ms".
std::string describe(const FaultStep& s);

}  // namespace reccl::test::soak
