// The daemon's per-client request budget: a burst, then the sustained rate, on an injected clock.
#include "client_limits.h"

#include <gtest/gtest.h>

namespace reccl::detector {
namespace {

constexpr uint64_t kMs = 1'000'000;

TEST(RequestBudget, AllowsTheBurstThenTheRate) {
  RequestBudget b(100, 200, 0);  // 100/s, burst 200
  int granted = 0;
  for (int i = 0; i < 1000; ++i) granted += b.take(0);
  EXPECT_EQ(granted, 200);
  EXPECT_FALSE(b.take(5 * kMs)) << "half a token after 5 ms";
  EXPECT_TRUE(b.take(10 * kMs)) << "one token after 10 ms";
  // A second later: 100 more, not more.
  granted = 0;
  for (int i = 0; i < 1000; ++i) granted += b.take(1010 * kMs);
  EXPECT_EQ(granted, 100);
}

TEST(RequestBudget, AnIdleClientGetsItsBurstBackButNoMore) {
  RequestBudget b(10, 20, 0);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(b.take(0));
  EXPECT_FALSE(b.take(0));
  int granted = 0;
  for (int i = 0; i < 100; ++i) granted += b.take(3600'000 * kMs);
  EXPECT_EQ(granted, 20);
}

TEST(RequestBudget, AClientAtItsRateIsNeverRefused) {
  RequestBudget b(100, 200, 0);
  for (uint64_t t = 0; t < 60'000; t += 10) ASSERT_TRUE(b.take(t * kMs)) << "at " << t << " ms";
}

TEST(ClientLimits, ValidateNamesTheBadLimit) {
  EXPECT_TRUE(ClientLimits{}.validate().ok());
  ClientLimits l;
  l.maxWatches = 0;
  EXPECT_NE(l.validate().message().find("max-watches-per-client"), std::string::npos);
  l = {};
  l.requestsPerSec = 0;
  EXPECT_NE(l.validate().message().find("max-requests-per-sec"), std::string::npos);
  l = {};
  l.maxClientsPerUid = 0;
  EXPECT_NE(l.validate().message().find("max-clients-per-uid"), std::string::npos);
}

}  // namespace
}  // namespace reccl::detector
