// How often fail-backs are offered again (failover/rebalance/fail_back_pacing.h): after an up
// event while the rail stays up, and the hold-off of standby-made fail-backs per (peer, rail).
#include "failover/rebalance/fail_back_pacing.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace reccl::failover {
namespace {

constexpr uint64_t kS = 1'000'000'000ull;

TEST(FailBackPacing, OffersAgainAtDoublingIntervalsUpToAMinute) {
  const std::vector<uint64_t> ms = {1500, 3000, 6000, 12000, 24000, 48000, 60000, 60000};
  for (int tries = 0; tries < static_cast<int>(ms.size()); ++tries)
    EXPECT_EQ(failBackRetryWaitNs(tries), ms[tries] * 1'000'000ull) << "after " << tries << " offers again";
  EXPECT_EQ(failBackRetryWaitNs(1000), kFailBackRetryMaxNs);
  EXPECT_EQ(failBackRetryWaitNs(-1), kFailBackRetryFirstNs);
}

// A rail that carries a standby's connect but not the collective: the stall check moves its
// connections off again and the next standby brings them back, over and over. Each return is
// held off longer, up to the cap, and stays there while the bouncing goes on; a quiet window
// after the hold clears it.
TEST(FailBackPacing, AStandbyMadeFailBackThatKeepsActingIsHeldOffLongerUpToTheCap) {
  struct Step {
    uint64_t atS;
    bool acts;
    uint64_t holdAfterS;  // the hold once this step is judged
  };
  const std::vector<Step> steps = {
      {100, true, 0},    // the first acts, and holds nothing
      {101, true, 4},    // so does the second, in the window: the hold begins
      {103, false, 4},   // held: nothing counted
      {105, true, 8},    // the hold is over: acts, and the hold doubles
      {112, false, 8},
      {113, true, 16},
      {129, true, 32},
      {161, true, 64},   // the cap
      {224, false, 64},
      {225, true, 64},   // still bouncing: stays at the cap (it cleared itself when the window ran from the act)
      {289, true, 64},
      {289 + 64 + 59, true, 64},  // 59 s quiet after the hold: not yet a quiet window
      {412 + 64 + 60, true, 0},   // a whole window quiet after the hold: cleared
      {537, true, 4},
  };
  CarriesHold h;
  for (const Step& s : steps) {
    EXPECT_EQ(carriesHoldLets(h, s.atS * kS), s.acts) << "at " << s.atS << " s";
    EXPECT_EQ(h.holdNs, s.holdAfterS * kS) << "at " << s.atS << " s";
  }
}

}  // namespace
}  // namespace reccl::failover
