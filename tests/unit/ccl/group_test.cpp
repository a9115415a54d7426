// recclGroupStart/recclGroupEnd as NCCL users rely on them: one thread drives every
// communicator of recclCommInitAll through one group (collectives and sends/receives larger than
// the slots, which would wait on each other if the communicators ran one after another), each
// communicator's calls keep their order, and a communicator destroyed inside the group (by any
// thread) makes its recclGroupEnd fail instead of running on a freed handle.
#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api/cost_model.h"
#include "ccl_test_util.h"
#include "reccl/common/log.h"

namespace {

using reccl::test::Comms;
using reccl::test::ScopedEnv;

// A failure ends within seconds instead of the default minute.
constexpr const char* kTimeoutMs = "20000";

// What a communicator that has learned nothing estimates for a call of this cost, in µs.
double firstGuessUs(const reccl::algo::Cost& c) { return 1e6 * reccl::api::CostModel{}.estimateSeconds(c); }

TEST(CclGroup, OneThreadDrivesEveryCommunicatorsCollectivesInOrder) {
  ScopedEnv timeout("RECCL_TIMEOUT_MS", kTimeoutMs);
  const int n = 3;
  const size_t count = 1 << 20;  // 4 MiB of int32: many slots' worth
  Comms comms(n);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(count)), sum(n), bcast(n);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) in[r][i] = static_cast<int32_t>(i * 7 + r);
    sum[r].assign(count, -1);
    bcast[r].assign(count, -1);
  }
  ASSERT_EQ(recclGroupStart(), recclSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(recclAllReduce(in[r].data(), sum[r].data(), count, recclInt32, recclSum, comms[r], nullptr),
              recclSuccess);
    // In place on the sum: it must run after the allreduce of the same communicator.
    ASSERT_EQ(recclBroadcast(sum[r].data(), bcast[r].data(), count, recclInt32, 1, comms[r], nullptr), recclSuccess);
  }
  ASSERT_EQ(recclGroupEnd(), recclSuccess) << recclGetLastError(nullptr);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) {
      const int32_t want = static_cast<int32_t>(3 * (i * 7) + 0 + 1 + 2);
      ASSERT_EQ(sum[r][i], want) << "rank " << r << " element " << i;
      ASSERT_EQ(bcast[r][i], want) << "rank " << r << " element " << i;
    }
}

TEST(CclGroup, OneThreadSendsAndReceivesLargeMessagesAcrossCommunicators) {
  ScopedEnv timeout("RECCL_TIMEOUT_MS", kTimeoutMs);
  const int n = 2;
  const size_t count = 4 << 20;  // 16 MiB each way
  Comms comms(n);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::vector<uint32_t>> out(n, std::vector<uint32_t>(count)), back(n, std::vector<uint32_t>(count, 0));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) out[r][i] = static_cast<uint32_t>(i * 2654435761u + r);
  std::vector<int32_t> one(n, 1), sum(n, 0);
  ASSERT_EQ(recclGroupStart(), recclSuccess);
  for (int r = 0; r < n; ++r) {
    // A collective between a send and its receive: the sends and receives still go together.
    ASSERT_EQ(recclSend(out[r].data(), count, recclUint32, (r + 1) % n, comms[r], nullptr), recclSuccess);
    ASSERT_EQ(recclAllReduce(&one[r], &sum[r], 1, recclInt32, recclSum, comms[r], nullptr), recclSuccess);
    ASSERT_EQ(recclRecv(back[r].data(), count, recclUint32, (r + n - 1) % n, comms[r], nullptr), recclSuccess);
  }
  ASSERT_EQ(recclGroupEnd(), recclSuccess) << recclGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(back[r] == out[(r + n - 1) % n]) << "rank " << r << " got other bytes";
    EXPECT_EQ(sum[r], n) << "rank " << r;
  }
}

// Nested groups run at the outermost recclGroupEnd.
TEST(CclGroup, NestedGroupsRunAtTheOutermostEnd) {
  Comms comms(1);
  ASSERT_TRUE(comms.ok()) << comms.error();
  int32_t in = 5, out = 0;
  ASSERT_EQ(recclGroupStart(), recclSuccess);
  ASSERT_EQ(recclGroupStart(), recclSuccess);
  ASSERT_EQ(recclAllReduce(&in, &out, 1, recclInt32, recclSum, comms[0], nullptr), recclSuccess);
  ASSERT_EQ(recclGroupEnd(), recclSuccess);
  EXPECT_EQ(out, 0) << "ran before the outermost recclGroupEnd";
  ASSERT_EQ(recclGroupEnd(), recclSuccess) << recclGetLastError(nullptr);
  EXPECT_EQ(out, 5);
}

TEST(CclGroup, ACommunicatorDestroyedInsideTheGroupFailsItsGroupEnd) {
  Comms comms(1);
  ASSERT_TRUE(comms.ok()) << comms.error();
  int32_t v = 1;
  ASSERT_EQ(recclGroupStart(), recclSuccess);
  ASSERT_EQ(recclAllReduce(&v, &v, 1, recclInt32, recclSum, comms[0], nullptr), recclSuccess);
  ASSERT_EQ(recclCommDestroy(comms[0]), recclSuccess);
  comms.forget(0);
  EXPECT_EQ(recclGroupEnd(), recclInvalidUsage);
  EXPECT_NE(std::string(recclGetLastError(nullptr)).find("destroyed or aborted inside the group"), std::string::npos)
      << recclGetLastError(nullptr);
  // The thread's next group starts clean.
  EXPECT_EQ(recclGroupStart(), recclSuccess);
  EXPECT_EQ(recclGroupEnd(), recclSuccess) << recclGetLastError(nullptr);
}

// A watchdog thread aborts a communicator another thread has queued calls for in its open group:
// that group's recclGroupEnd fails, having run nothing, instead of reading the freed handle.
TEST(CclGroup, ACommunicatorAbortedByAnotherThreadFailsTheGroupThatQueuedIt) {
  Comms comms(1);
  ASSERT_TRUE(comms.ok()) << comms.error();
  int32_t in = 7, out = 0;
  std::promise<void> queued, aborted;
  recclResult_t queueRc = recclInternalError, endRc = recclInternalError, nextRc = recclInternalError;
  std::string why;
  std::thread caller([&] {
    recclGroupStart();
    queueRc = recclAllReduce(&in, &out, 1, recclInt32, recclSum, comms[0], nullptr);
    queued.set_value();
    aborted.get_future().wait();
    endRc = recclGroupEnd();
    why = recclGetLastError(nullptr);
    recclGroupStart();
    nextRc = recclGroupEnd();  // the thread's next group starts clean
  });
  queued.get_future().wait();
  EXPECT_EQ(recclCommAbort(comms[0]), recclSuccess);
  comms.forget(0);
  aborted.set_value();
  caller.join();
  EXPECT_EQ(queueRc, recclSuccess);
  EXPECT_EQ(endRc, recclInvalidUsage);
  EXPECT_NE(why.find("destroyed or aborted inside the group with 1 operation"), std::string::npos) << why;
  EXPECT_EQ(out, 0);
  EXPECT_EQ(nextRc, recclSuccess);
}

// A thread that ends inside a group drops its queued calls (as NCCL does) and says so, and the
// communicator stays usable.
TEST(CclGroup, AThreadThatEndsInsideItsGroupSaysItDroppedItsCalls) {
  Comms comms(1);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::mutex mu;
  std::vector<std::string> warnings;
  reccl::logSetSink([&](reccl::LogLevel level, std::string_view line) {
    std::lock_guard lk(mu);
    if (level == reccl::LogLevel::kWarn) warnings.emplace_back(line);
  });
  int32_t in = 5, out = 0;
  std::thread([&] {
    recclGroupStart();
    recclGroupStart();
    recclAllReduce(&in, &out, 1, recclInt32, recclSum, comms[0], nullptr);
    recclGroupEnd();
  }).join();
  reccl::logSetSink(nullptr);
  EXPECT_EQ(out, 0);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("ended inside recclGroupStart with 1 operation(s) queued"), std::string::npos)
      << warnings[0];
  ASSERT_EQ(recclAllReduce(&in, &out, 1, recclInt32, recclSum, comms[0], nullptr), recclSuccess)
      << recclGetLastError(nullptr);
  EXPECT_EQ(out, 5);
}

// Sends to self and receives from self that do not pair up are refused calls: nothing runs, and
// the communicator, its peers included, stays usable.
TEST(CclGroup, UnpairedSelfSendsAreRefusedAndTheCommunicatorStaysUsable) {
  ScopedEnv timeout("RECCL_TIMEOUT_MS", kTimeoutMs);
  Comms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  int32_t v[2] = {3, 4}, w[2] = {0, 0};
  EXPECT_EQ(recclSend(v, 1, recclInt32, 0, comms[0], nullptr), recclInvalidArgument);
  EXPECT_NE(std::string(recclGetLastError(nullptr)).find("send to self needs a matching receive from self"),
            std::string::npos)
      << recclGetLastError(nullptr);
  ASSERT_EQ(recclGroupStart(), recclSuccess);
  ASSERT_EQ(recclSend(v, 1, recclInt32, 0, comms[0], nullptr), recclSuccess);
  ASSERT_EQ(recclRecv(w, 2, recclInt32, 0, comms[0], nullptr), recclSuccess);
  EXPECT_EQ(recclGroupEnd(), recclInvalidArgument);
  EXPECT_NE(std::string(recclGetLastError(nullptr)).find("differ in count or type"), std::string::npos)
      << recclGetLastError(nullptr);
  EXPECT_EQ(w[0], 0);
  // A pair that matches copies.
  ASSERT_EQ(recclGroupStart(), recclSuccess);
  ASSERT_EQ(recclSend(v, 2, recclInt32, 0, comms[0], nullptr), recclSuccess);
  ASSERT_EQ(recclRecv(w, 2, recclInt32, 0, comms[0], nullptr), recclSuccess);
  ASSERT_EQ(recclGroupEnd(), recclSuccess) << recclGetLastError(nullptr);
  EXPECT_EQ(w[1], 4);
  std::vector<int32_t> out(2, 0);
  auto rcs = comms.run([&](int r, recclComm_t c) {
    int32_t in = r + 1;
    return recclAllReduce(&in, &out[static_cast<size_t>(r)], 1, recclInt32, recclSum, c, nullptr);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(rcs[static_cast<size_t>(r)], recclSuccess) << "rank " << r;
    EXPECT_EQ(out[static_cast<size_t>(r)], 3) << "rank " << r;
  }
}

// recclGroupSimulateEnd on every rank: nothing runs (the buffers and the counters stay as they
// were, and the next real call pairs as if the group never was), the estimate is each
// communicator's operations added up, priced before any call by the first guess (50 us a hop,
// 1 GB/s) on the algorithm's hops and bytes, and after real calls by what they took.
TEST(CclGroup, ASimulatedGroupRunsNothingAndPricesItsOperations) {
  ScopedEnv timeout("RECCL_TIMEOUT_MS", kTimeoutMs);
  const int n = 2;
  const size_t big = size_t{16} << 20;  // floats: 64 MiB, the ring (past the small-message size)
  Comms comms(n);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::vector<float>> in(n, std::vector<float>(big, 1.0f)), out(n, std::vector<float>(big, -1.0f));
  // Each rank simulates a group: the big all-reduce alone, a small one alone, both together.
  auto simulate = [&](bool withBig, bool withSmall, std::vector<float>* us) {
    us->assign(n, -1.0f);
    auto rcs = comms.run([&](int r, recclComm_t c) -> recclResult_t {
      recclSimInfo_t info = RECCL_SIM_INFO_INITIALIZER;
      if (recclGroupStart() != recclSuccess) return recclInternalError;
      if (withBig && recclAllReduce(in[r].data(), out[r].data(), big, recclFloat32, recclSum, c, nullptr) != recclSuccess)
        return recclInternalError;
      if (withSmall && recclAllReduce(in[r].data(), out[r].data(), 16, recclFloat32, recclSum, c, nullptr) != recclSuccess)
        return recclInternalError;
      const recclResult_t rc = recclGroupSimulateEnd(&info);
      (*us)[static_cast<size_t>(r)] = info.estimatedTime;
      return rc;
    });
    for (int r = 0; r < n; ++r) ASSERT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << recclGetLastError(nullptr);
  };
  std::vector<float> bigUs, smallUs, bothUs;
  ASSERT_NO_FATAL_FAILURE(simulate(true, false, &bigUs));
  ASSERT_NO_FATAL_FAILURE(simulate(false, true, &smallUs));
  ASSERT_NO_FATAL_FAILURE(simulate(true, true, &bothUs));
  for (int r = 0; r < n; ++r) {
    // The ring: 2(n-1) hops, each rank moving 2(n-1)/n of the bytes.
    const double guess = firstGuessUs({2, 64.0 * 1024 * 1024});
    EXPECT_NEAR(bigUs[r], guess, 1e-3 * guess) << "rank " << r;
    EXPECT_GT(smallUs[r], 0) << "rank " << r;
    EXPECT_LT(smallUs[r], bigUs[r]) << "rank " << r;
    EXPECT_NEAR(bothUs[r], bigUs[r] + smallUs[r], 1e-3 * bothUs[r]) << "rank " << r;
    EXPECT_EQ(out[r][0], -1.0f) << "rank " << r << ": a simulated all-reduce wrote its output";
    recclCommStats_t st{};
    st.size = sizeof(st);
    ASSERT_EQ(recclCommGetStats(comms[r], &st), recclSuccess);
    EXPECT_EQ(st.collectives, 0u) << "rank " << r << ": a simulated group ran";
  }
  // Real calls: they pair as if no simulation happened, and teach the model this machine.
  auto rcs = comms.run([&](int r, recclComm_t c) -> recclResult_t {
    for (size_t count : {size_t{16}, size_t{1} << 16, size_t{1} << 20, big})
      if (recclResult_t rc = recclAllReduce(in[r].data(), out[r].data(), count, recclFloat32, recclSum, c, nullptr);
          rc != recclSuccess)
        return rc;
    return recclSuccess;
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(rcs[r], recclSuccess) << "rank " << r;
  for (int r = 0; r < n; ++r) EXPECT_EQ(out[r][big - 1], 2.0f) << "rank " << r;
  std::vector<float> learnedUs;
  ASSERT_NO_FATAL_FAILURE(simulate(true, false, &learnedUs));
  for (int r = 0; r < n; ++r) EXPECT_NE(learnedUs[r], bigUs[r]) << "rank " << r << ": the real calls taught nothing";
}

// A call that made connections paid for them: it teaches the cost model nothing (the estimate
// after it is still the first guess), and the next call does. Three ranks: the init connects each
// to its ring neighbours, and the first all-to-all connects the pairs the ring does not.
TEST(CclGroup, ACallThatMadeConnectionsTeachesTheSimulationNothing) {
  ScopedEnv timeout("RECCL_TIMEOUT_MS", kTimeoutMs);
  const int n = 3;
  const size_t count = 16;  // floats to each peer
  Comms comms(n);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::vector<float>> in(n, std::vector<float>(n * count, 1.0f)), out(n, std::vector<float>(n * count));
  auto allToAll = [&](int r, recclComm_t c) {
    return recclAlltoAll(in[r].data(), out[r].data(), count, recclFloat32, c, nullptr);
  };
  auto real = [&] {
    auto rcs = comms.run(allToAll);
    for (int r = 0; r < n; ++r) ASSERT_EQ(rcs[r], recclSuccess) << "rank " << r;
  };
  auto simulate = [&](std::vector<float>* us) {
    us->assign(n, -1.0f);
    auto rcs = comms.run([&](int r, recclComm_t c) -> recclResult_t {
      recclSimInfo_t info = RECCL_SIM_INFO_INITIALIZER;
      if (recclGroupStart() != recclSuccess || allToAll(r, c) != recclSuccess) return recclInternalError;
      const recclResult_t rc = recclGroupSimulateEnd(&info);
      (*us)[static_cast<size_t>(r)] = info.estimatedTime;
      return rc;
    });
    for (int r = 0; r < n; ++r) ASSERT_EQ(rcs[r], recclSuccess) << "rank " << r;
  };
  // n-1 hops, each rank sending (n-1) x 64 bytes.
  const double guess = firstGuessUs({n - 1.0, static_cast<double>((n - 1) * count * sizeof(float))});
  std::vector<float> us;
  ASSERT_NO_FATAL_FAILURE(real());  // connects ranks 0 and 2 both ways
  ASSERT_NO_FATAL_FAILURE(simulate(&us));
  for (int r = 0; r < n; ++r) EXPECT_NEAR(us[r], guess, 1e-3 * guess) << "rank " << r << ": the connecting call taught it";
  ASSERT_NO_FATAL_FAILURE(real());
  ASSERT_NO_FATAL_FAILURE(simulate(&us));
  for (int r = 0; r < n; ++r) EXPECT_NE(us[r], static_cast<float>(guess)) << "rank " << r << ": the second call taught nothing";
}

// What the call refuses: a simInfo not set from the initializer (the group stays open, and its
// recclGroupEnd runs it), and no group to end.
TEST(CclGroup, GroupSimulateEndChecksItsArguments) {
  recclSimInfo_t info = RECCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(recclGroupSimulateEnd(&info), recclInvalidUsage);
  EXPECT_NE(std::string(recclGetLastError(nullptr)).find("without recclGroupStart"), std::string::npos);
  EXPECT_EQ(recclGroupSimulateEnd(nullptr), recclInvalidArgument);
  ASSERT_EQ(recclGroupStart(), recclSuccess);
  recclSimInfo_t unset{};
  EXPECT_EQ(recclGroupSimulateEnd(&unset), recclInvalidArgument);
  EXPECT_NE(std::string(recclGetLastError(nullptr)).find("RECCL_SIM_INFO_INITIALIZER"), std::string::npos);
  EXPECT_EQ(recclGroupEnd(), recclSuccess) << "the refused simulation closed the group";
  EXPECT_EQ(recclGroupEnd(), recclInvalidUsage);
  ASSERT_EQ(recclGroupStart(), recclSuccess);
  ASSERT_EQ(recclGroupStart(), recclSuccess);
  EXPECT_EQ(recclGroupSimulateEnd(&info), recclSuccess);  // the inner one: only the nesting
  EXPECT_EQ(recclGroupSimulateEnd(&info), recclSuccess);
  EXPECT_EQ(info.estimatedTime, 0.0f) << "an empty group takes no time";
}

}  // namespace
