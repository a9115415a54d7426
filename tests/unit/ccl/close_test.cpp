// Closing a communicator (recclCommDestroy, recclCommAbort) beside calls on other threads, and
// what a closed handle answers (api/comm_handle.h, "Closing"): the close frees nothing while a
// call is inside, a second close or a late call is refused by name. Also under the sanitizers.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ccl_test_util.h"

namespace {

using reccl::test::Comms;
using reccl::test::ScopedEnv;
using Ms = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

std::string lastError() { return recclGetLastError(nullptr); }

// Rank 0 calls an all-reduce on its own thread that rank 1 never joins; `inside` is set just
// before the call (the caller then waits a little for it to be inside).
struct LoneCall {
  explicit LoneCall(recclComm_t c) : x(1 << 16, 1.0f) {
    t = std::thread([this, c] {
      calling = true;
      rc = recclAllReduce(x.data(), x.data(), x.size(), recclFloat32, recclSum, c, nullptr);
    });
    while (!calling.load()) std::this_thread::sleep_for(Ms(1));
    std::this_thread::sleep_for(Ms(200));
  }
  ~LoneCall() {
    if (t.joinable()) t.join();
  }
  std::vector<float> x;
  std::atomic<bool> calling{false};
  std::atomic<recclResult_t> rc{recclSuccess};
  std::thread t;
};

// Two ranks as threads; rank 0's handle is the test's to close, rank 1's goes with the fixture.
// Opened in the test body, after the test set the environment the communicators read.
class CclClose : public ::testing::Test {
 protected:
  void open(recclComm_t* rank0) {
    comms_.emplace(2);
    ASSERT_TRUE(comms_->ok()) << comms_->error();
    *rank0 = (*comms_)[0];
    comms_->forget(0);
  }

 private:
  std::optional<Comms> comms_;
};

TEST_F(CclClose, ASecondCloseOfAHandleIsRefusedByName) {
  recclComm_t c = nullptr;
  ASSERT_NO_FATAL_FAILURE(open(&c));
  ASSERT_EQ(recclCommDestroy(c), recclSuccess) << lastError();
  EXPECT_EQ(recclCommDestroy(c), recclInvalidUsage);
  EXPECT_NE(lastError().find("destroyed or aborted"), std::string::npos) << lastError();
  EXPECT_EQ(recclCommAbort(c), recclInvalidUsage);
  EXPECT_NE(lastError().find("destroyed or aborted"), std::string::npos) << lastError();
}

TEST_F(CclClose, CallsOnAnAbortedHandleAreRefused) {
  recclComm_t c = nullptr;
  ASSERT_NO_FATAL_FAILURE(open(&c));
  ASSERT_EQ(recclCommAbort(c), recclSuccess) << lastError();
  float x[4] = {};
  EXPECT_EQ(recclAllReduce(x, x, 4, recclFloat32, recclSum, c, nullptr), recclInvalidUsage);
  EXPECT_NE(lastError().find("destroyed or aborted"), std::string::npos) << lastError();
  recclResult_t async = recclSuccess;
  EXPECT_EQ(recclCommGetAsyncError(c, &async), recclInvalidUsage);
  int n = 0;
  EXPECT_EQ(recclCommCount(c, &n), recclInvalidUsage);
  EXPECT_EQ(recclCommFinalize(c), recclInvalidUsage);
  recclComm_t child = nullptr;
  EXPECT_EQ(recclCommSplit(c, 0, 0, &child, nullptr), recclInvalidUsage);
  EXPECT_EQ(child, nullptr);
  ASSERT_EQ(recclGroupStart(), recclSuccess);
  EXPECT_EQ(recclAllReduce(x, x, 4, recclFloat32, recclSum, c, nullptr), recclInvalidUsage);
  EXPECT_EQ(recclGroupEnd(), recclSuccess);  // nothing was queued
}

// A destroy beside a call still inside (the caller's mistake, never a crash): the destroy waits
// for the call, which ends at its deadline, and frees only then.
TEST_F(CclClose, DestroyBesideACallWaitsForItToLeave) {
  ScopedEnv t("RECCL_TIMEOUT_MS", "1500");
  recclComm_t c = nullptr;
  ASSERT_NO_FATAL_FAILURE(open(&c));
  LoneCall call(c);
  const auto start = Clock::now();
  EXPECT_EQ(recclCommDestroy(c), recclSuccess) << lastError();
  // The call had ~1.3 s of its deadline left: a destroy that freed under it returned at once.
  EXPECT_GE(Clock::now() - start, Ms(900));
  call.t.join();
  EXPECT_EQ(call.rc.load(), recclTimeout) << recclGetErrorString(call.rc.load());
}

// A destroy waiting for a call that would run for a minute, and a watchdog's abort meanwhile:
// the abort returns at once and the destroy aborts the call instead of waiting it out.
TEST_F(CclClose, AnAbortDuringADestroysWaitEndsTheCallsItWaitsFor) {
  ScopedEnv t("RECCL_TIMEOUT_MS", "60000");
  recclComm_t c = nullptr;
  ASSERT_NO_FATAL_FAILURE(open(&c));
  LoneCall call(c);
  std::atomic<recclResult_t> destroyed{recclInternalError};
  const auto start = Clock::now();
  std::thread d([&] { destroyed = recclCommDestroy(c); });
  std::this_thread::sleep_for(Ms(300));  // the destroy waits for the call
  EXPECT_EQ(recclCommAbort(c), recclSuccess) << lastError();
  d.join();
  EXPECT_LT(Clock::now() - start, Ms(5000));  // against the 60 s deadline, load included
  EXPECT_EQ(destroyed.load(), recclSuccess);
  call.t.join();
  EXPECT_EQ(call.rc.load(), recclAborted) << recclGetErrorString(call.rc.load());
}

// A watchdog's abort beside a call inside (the pattern of PyTorch's watchdog): the call returns
// recclAborted promptly and the handle is freed only after it left. Repeated: under the
// sanitizers a free under the call would show.
TEST_F(CclClose, AbortBesideACallFreesOnlyAfterItLeft) {
  ScopedEnv t("RECCL_TIMEOUT_MS", "60000");
  for (int i = 0; i < 3; ++i) {
    recclComm_t c = nullptr;
    ASSERT_NO_FATAL_FAILURE(open(&c));
    LoneCall call(c);
    const auto start = Clock::now();
    EXPECT_EQ(recclCommAbort(c), recclSuccess) << lastError();
    EXPECT_LT(Clock::now() - start, Ms(3000));  // against the 60 s deadline, load included
    call.t.join();
    EXPECT_EQ(call.rc.load(), recclAborted) << recclGetErrorString(call.rc.load());
  }
}

}  // namespace
