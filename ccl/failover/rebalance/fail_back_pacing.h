// How often fail-backs are offered again: pure, table-tested (tests/unit/failover/fail_back_pacing_test.cpp).
// Two paces, both on the monitor's side (failover/monitor.h):
// - a rail that came up (or began to carry again) keeps offering what still prefers it its
//   fail-back while it stays up: a fail-back's one try can fail on a rail that is up but does not
//   carry yet (a switch port still learning, a neighbour still settling);
// - a standby-made fail-back (Monitor::railCarriesAgain) is held off per (peer, rail) when it keeps
//   acting: a rail that carries a connect but not a collective (the stall check moves the
//   connections off again) would otherwise bounce them every few seconds.
#pragma once

#include <cstdint>

namespace reccl::failover {

// The first offer again comes this long after the up event: past one fail-back's own time (two
// connect attempts). Then at doubling intervals up to the cap: a rail that never carries costs a
// connect attempt a minute at most.
inline constexpr uint64_t kFailBackRetryFirstNs = 1'500'000'000ull;
inline constexpr uint64_t kFailBackRetryMaxNs = 60'000'000'000ull;
// The wait before the offer after `tries` offers again (0: the first).
uint64_t failBackRetryWaitNs(int tries);

// Each standby-made fail-back that comes within kCarriesWindowNs of the end of the hold before it
// doubles the hold before the next (kCarriesHoldFirstNs .. kCarriesHoldMaxNs); a window that quiet
// clears it, so the first two act at once.
inline constexpr uint64_t kCarriesHoldFirstNs = 4'000'000'000ull;
inline constexpr uint64_t kCarriesHoldMaxNs = 64'000'000'000ull;
inline constexpr uint64_t kCarriesWindowNs = 60'000'000'000ull;
struct CarriesHold {
  uint64_t lastNs = 0;  // when it last acted; 0: never
  uint64_t holdNs = 0;  // how long after lastNs it holds off now
};
// Whether a standby-made fail-back acts at `nowNs`; when it does, `h` counts it.
bool carriesHoldLets(CarriesHold& h, uint64_t nowNs);

}  // namespace reccl::failover
