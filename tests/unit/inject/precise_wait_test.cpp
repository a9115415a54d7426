// The timing primitives of the plan runner: never early, stoppable, percentiles by nearest rank.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <thread>

#include "reccl/common/unique_fd.h"
#include "reccl/inject/plan_runner.h"
#include "reccl/inject/precise_wait.h"

using namespace reccl;
using namespace reccl::inject;

TEST(PreciseWait, NeverReturnsBeforeTheDeadline) {
  std::vector<int64_t> late;
  for (int i = 0; i < 50; ++i) {
    int64_t deadline = monotonicNs() + 2'000'000;
    ASSERT_EQ(waitUntil(deadline, -1, 100'000), WaitResult::kReached);
    int64_t now = monotonicNs();
    ASSERT_GE(now, deadline);
    late.push_back(now - deadline);
  }
  std::printf("waitUntil lateness over 50 waits: p50 %.1f us, max %.1f us\n",
              percentileNs(late, 0.5) / 1e3, percentileNs(late, 1.0) / 1e3);
}

TEST(PreciseWait, StopFdEndsALongWaitPromptly) {
  UniqueFd ev(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  ASSERT_TRUE(ev.valid());
  std::thread poke([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    uint64_t one = 1;
    ASSERT_EQ(::write(ev.get(), &one, sizeof(one)), 8);
  });
  int64_t start = monotonicNs();
  EXPECT_EQ(waitUntil(start + 10'000'000'000LL, ev.get(), 100'000), WaitResult::kStopped);
  poke.join();
  EXPECT_LT(monotonicNs() - start, 1'000'000'000LL) << "a stop took more than 1 s to be seen";
}

TEST(PreciseWait, PastDeadlineReturnsAtOnce) {
  int64_t start = monotonicNs();
  // A deadline 10 s in the past: a wait that mistook it for a distance (or a wrapped unsigned
  // one) would sleep seconds or forever; "at once" is under 1 s even on a loaded machine,
  // where one preemption alone can last milliseconds.
  EXPECT_EQ(waitUntil(start - 10'000'000'000LL, -1, 100'000), WaitResult::kReached);
  EXPECT_LT(monotonicNs() - start, 1'000'000'000LL);
}

TEST(Percentile, NearestRank) {
  std::vector<int64_t> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(percentileNs(v, 0.5), 50);
  EXPECT_EQ(percentileNs(v, 0.99), 99);
  EXPECT_EQ(percentileNs(v, 1.0), 100);
  EXPECT_EQ(percentileNs({}, 0.99), 0);
  EXPECT_EQ(percentileNs({7}, 0.0), 7);
}
