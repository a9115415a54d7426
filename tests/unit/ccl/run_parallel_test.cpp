// Comm::runParallel, the channel workers' fan-out: errors come back, and a worker that stops
// making progress becomes a timeout error in bounded time instead of a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "api/comm_access.h"
#include "ccl_test_util.h"

namespace reccl {
namespace {

using Clock = std::chrono::steady_clock;
using test::Comms;
using test::ScopedEnv;

long long msSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// One rank, two channels (so one worker thread), no failover threads, a short step deadline.
struct OneRankTwoChannels {
  ScopedEnv ch{"RECCL_NCHANNELS", "2"};
  ScopedEnv th{"RECCL_CHANNEL_THREADS", "2"};  // a worker whatever the machine's CPUs
  ScopedEnv to{"RECCL_TIMEOUT_MS", "300"};
  ScopedEnv fo{"RECCL_FAILOVER", "0"};
  Comms comms{1};
  core::Comm* comm() const { return api::commImpl(comms[0]); }
};

TEST(CclRunParallel, EveryChannelRunsAndTheFirstErrorComesBack) {
  OneRankTwoChannels f;
  ASSERT_TRUE(f.comms.ok()) << f.comms.error();
  auto ran = std::make_shared<std::atomic<int>>(0);
  Status s = f.comm()->runParallel(2, [ran](int i) -> Status {
    ran->fetch_add(1 << i);
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(ran->load(), 3);

  Status e = f.comm()->runParallel(2, [](int i) -> Status {
    if (i == 1) return Status(Errc::kInvalidUsage, "channel one says no");
    return Status::Ok();
  });
  EXPECT_EQ(e.code(), Errc::kInvalidUsage);
  EXPECT_EQ(e.message(), "channel one says no");
}

TEST(CclRunParallel, WorkerWithoutProgressFailsTheCommunicatorInTime) {
  OneRankTwoChannels f;
  ASSERT_TRUE(f.comms.ok()) << f.comms.error();
  core::Comm* c = f.comm();
  auto sawFailure = std::make_shared<std::atomic<bool>>(false);
  auto t0 = Clock::now();
  // Channel 1 waits for something that never comes, watching only the communicator's state
  // (as a port wait does): the fan-out must fail the communicator, which releases it.
  Status s = c->runParallel(2, [c, sawFailure](int i) -> Status {
    if (i == 0) return Status::Ok();
    auto until = Clock::now() + std::chrono::seconds(20);
    while (c->asyncError().ok() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    sawFailure->store(!c->asyncError().ok());
    return c->asyncError();
  });
  long long ms = msSince(t0);
  EXPECT_EQ(s.code(), Errc::kTimeout) << s.message();
  EXPECT_NE(s.message().find("no progress"), std::string::npos) << s.message();
  EXPECT_GE(ms, 250);
  EXPECT_LT(ms, 3000);
  EXPECT_TRUE(sawFailure->load());
  EXPECT_EQ(c->asyncError().code(), Errc::kTimeout);
}

TEST(CclRunParallel, WorkerThatIgnoresTheFailureIsLeftOnSharedState) {
  auto finished = std::make_shared<std::atomic<bool>>(false);
  {
    OneRankTwoChannels f;
    ASSERT_TRUE(f.comms.ok()) << f.comms.error();
    auto t0 = Clock::now();
    // Channel 1 ignores everything for 1.5 s: the call returns after one window without progress
    // and one more window for the workers to stop, while the worker keeps its own copy of fn.
    Status s = f.comm()->runParallel(2, [finished](int i) -> Status {
      if (i == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        finished->store(true);
      }
      return Status::Ok();
    });
    long long ms = msSince(t0);
    EXPECT_EQ(s.code(), Errc::kTimeout) << s.message();
    EXPECT_NE(s.message().find("did not stop"), std::string::npos) << s.message();
    EXPECT_GE(ms, 500);
    EXPECT_LT(ms, 1400);
    EXPECT_FALSE(finished->load());
  }  // destroying the communicator waits for its worker
  EXPECT_TRUE(finished->load());
}

}  // namespace
}  // namespace reccl
