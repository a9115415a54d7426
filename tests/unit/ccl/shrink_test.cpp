// recclCommShrink (NCCL's ncclCommShrink) on ranks as threads: healthy shrinks (the excluded ranks
// not calling), the argument checks, ranks that disagree on the list, and recclCommRevoke (NCCL's
// ncclCommRevoke) before a shrink or a split. Run under ASan and TSan too (the handover crosses the leader's
// call, the survivors' listener threads and their calls; a revoke crosses a call on another thread).
// After a rank's death, as processes: CclErrors.SurvivorsOfAKilledRankShrinkAndGoOn.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "api/comm_access.h"
#include "ccl_test_util.h"
#include "core/comm.h"
#include "core/wire.h"
#include "reccl/reccl.h"

namespace {

using reccl::test::Comms;
using reccl::test::ScopedEnv;

// A rank's failure: its message kept for the test's report, its code (never recclSuccess) returned.
struct Failer {
  std::string& err;
  recclResult_t operator()(recclResult_t rc, const std::string& why) const {
    err = why;
    return rc == recclSuccess ? recclInternalError : rc;
  }
};

// Waits for another rank's thread to set `flag`, 10 s at most (a missing flag fails later, not here).
void waitUntil(const std::atomic<bool>& flag) {
  for (int i = 0; i < 1000 && !flag.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// recclCommShrink on a healthy communicator (RECCL_SHRINK_DEFAULT): the excluded ranks do not
// call it; the others get a child of their own ranks in order, gaps closed, whose allreduce is
// exact; later shrinks of the same parent bring an excluded rank back as a caller (each list's
// shrinks are counted alike by their callers) and have another leader. (After a rank's death, with
// RECCL_SHRINK_ABORT: CclErrors.SurvivorsOfAKilledRankShrinkAndGoOn.)
TEST(Shrink, LeavesTheExcludedRanksOut) {
  const int n = 4;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  struct Case {
    std::vector<int> excluded;
  };
  for (const Case& k : {Case{{1}}, Case{{2}}, Case{{0, 1}}, Case{{2}}}) {
    std::vector<std::string> errs(n);
    auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
      if (std::count(k.excluded.begin(), k.excluded.end(), r)) return recclSuccess;  // not a caller
      std::vector<int> ex = k.excluded;
      recclComm_t child = nullptr;
      if (recclResult_t rc = recclCommShrink(c, ex.data(), static_cast<int>(ex.size()), &child, nullptr,
                                             RECCL_SHRINK_DEFAULT);
          rc) {
        errs[r] = recclGetLastError(c);
        return rc;
      }
      int cn = 0, cr = -1;
      recclCommCount(child, &cn);
      recclCommUserRank(child, &cr);
      int want = 0;
      for (int q = 0; q < r; ++q) want += std::count(k.excluded.begin(), k.excluded.end(), q) ? 0 : 1;
      if (cn != n - static_cast<int>(k.excluded.size()) || cr != want) {
        errs[r] = "child rank " + std::to_string(cr) + " of " + std::to_string(cn) + ", want rank " + std::to_string(want);
        recclCommDestroy(child);
        return recclInternalError;
      }
      std::vector<int64_t> v(1001, r + 1);
      recclResult_t rc = recclAllReduce(v.data(), v.data(), v.size(), recclInt64, recclSum, child, nullptr);
      int64_t sum = 0;
      for (int q = 0; q < n; ++q) sum += std::count(k.excluded.begin(), k.excluded.end(), q) ? 0 : q + 1;
      if (rc == recclSuccess && std::count(v.begin(), v.end(), sum) != static_cast<long>(v.size())) {
        errs[r] = "allreduce on the child: got " + std::to_string(v[0]) + ", want " + std::to_string(sum);
        rc = recclInternalError;
      }
      recclCommDestroy(child);
      return rc;
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << errs[r];
  }

  // Refused on one rank before anything is sent, naming the argument.
  recclComm_t c = world[0];
  recclComm_t child = nullptr;
  auto refused = [&](recclResult_t rc, const char* needle, const char* what) {
    EXPECT_EQ(rc, recclInvalidArgument) << what;
    EXPECT_NE(std::string(recclGetLastError(nullptr)).find(needle), std::string::npos)
        << what << ": " << recclGetLastError(nullptr);
    EXPECT_EQ(child, nullptr) << what;
  };
  int self = 0, far = 4, twice[2] = {2, 2}, one = 1;
  refused(recclCommShrink(c, &self, 1, &child, nullptr, 0), "holds this rank", "self excluded");
  refused(recclCommShrink(c, &far, 1, &child, nullptr, 0), "rank 4 is not in [0, 4)", "rank out of range");
  refused(recclCommShrink(c, twice, 2, &child, nullptr, 0), "rank 2 is listed twice", "duplicate");
  refused(recclCommShrink(c, &one, -1, &child, nullptr, 0), "excludeRanksCount", "negative count");
  refused(recclCommShrink(c, nullptr, 1, &child, nullptr, 0), "excludeRanksList: null", "null list");
  refused(recclCommShrink(c, &one, 1, &child, nullptr, 2), "shrinkFlags: 2", "unknown flag");
  refused(recclCommShrink(c, &one, 1, nullptr, nullptr, 0), "newcomm: null", "null newcomm");
}

// Ranks that pass different exclude lists fail instead of forming different groups: the one whose
// list differs from the leader's is told so; the others fail at their (short) rendezvous timeout.
TEST(Shrink, DifferentExcludeListsFail) {
  const int n = 3;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<std::string> errs(n);
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
    cfg.bootstrapTimeoutMs = 2000;
    int two = 2;
    recclComm_t child = nullptr;
    // Rank 0 leaves rank 2 out; ranks 1 and 2 leave nobody out.
    recclResult_t rc = recclCommShrink(c, &two, r == 0 ? 1 : 0, &child, &cfg, RECCL_SHRINK_DEFAULT);
    errs[r] = recclGetLastError(c);
    if (child) recclCommDestroy(child);
    return rc;
  });
  EXPECT_EQ(rcs[1], recclInvalidUsage) << errs[1];
  EXPECT_NE(errs[1].find("different exclude lists"), std::string::npos) << errs[1];
  EXPECT_NE(rcs[0], recclSuccess) << "rank 0 formed a communicator without rank 1";
  EXPECT_NE(rcs[2], recclSuccess) << "rank 2 got a communicator its leader never made";
  EXPECT_NE(errs[2].find("no word from rank 0"), std::string::npos) << errs[2];
}

// A watchdog's way on from a hung collective: ranks 0 and 1 are inside an allreduce that rank 2
// never joins (as if dead, with a deadline far off); another thread of each calls
// recclCommShrink(exclude 2, RECCL_SHRINK_ABORT), which aborts the parent (the allreduce returns
// with an error at once) and hands over the child, whose allreduce is exact.
TEST(Shrink, AbortFromAnotherThreadEndsAHungCallAndGoesOn) {
  ScopedEnv timeout("RECCL_TIMEOUT_MS", "60000");
  const int n = 3;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<std::string> errs(n);
  std::vector<recclResult_t> hung(n, recclSuccess);
  std::vector<double> hungSeconds(n, 0);
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    if (r == 2) return recclSuccess;  // the rank that never comes
    std::vector<float> x(4096, 1.0f);
    std::thread call([&, c, r] {
      auto t0 = std::chrono::steady_clock::now();
      hung[r] = recclAllReduce(x.data(), x.data(), x.size(), recclFloat32, recclSum, c, nullptr);
      hungSeconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // inside the allreduce by then
    int two = 2;
    recclComm_t child = nullptr;
    recclResult_t rc = recclCommShrink(c, &two, 1, &child, nullptr, RECCL_SHRINK_ABORT);
    call.join();
    if (rc != recclSuccess) {
      errs[r] = recclGetLastError(c);
      return rc;
    }
    std::vector<int32_t> v(1000, r + 1);
    rc = recclAllReduce(v.data(), v.data(), v.size(), recclInt32, recclSum, child, nullptr);
    if (rc == recclSuccess && v[999] != 3) {
      errs[r] = "child allreduce: " + std::to_string(v[999]);
      rc = recclInternalError;
    }
    recclCommDestroy(child);
    return rc;
  });
  for (int r : {0, 1}) {
    EXPECT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << errs[r];
    EXPECT_NE(hung[r], recclSuccess) << "rank " << r << ": the hung allreduce did not fail";
    EXPECT_LT(hungSeconds[r], 10.0) << "rank " << r << ": the abort did not end the hung allreduce";
  }
}

// recclCommRevoke from a watchdog thread: ranks 0 and 1 are inside an allreduce that rank 2 never
// joins. Rank 0's watchdog revokes first, which ends its call at once (recclAborted, naming the
// revoke); rank 1's revokes after it (its call then ends with an error: its own revoke's, or
// rank 0's close where that arrived first). On each,
// recclCommGetAsyncError then comes to recclSuccess (NCCL's ncclCommRevoke: quiet), everything
// but a shrink, a split, a close and the inspecting calls is refused, and recclCommShrink
// (RECCL_SHRINK_DEFAULT) on the revoked parent hands over a child whose allreduce is exact.
TEST(Shrink, RevokeFromAnotherThreadEndsAHungCallAndTheParentShrinks) {
  ScopedEnv timeout("RECCL_TIMEOUT_MS", "60000");
  const int n = 3;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<std::string> errs(n), hungErr(n);
  std::vector<recclResult_t> hung(n, recclSuccess);
  std::vector<double> hungSeconds(n, 0);
  std::atomic<bool> rank0Revoked{false};
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    if (r == 2) return recclSuccess;  // the rank that never comes
    const Failer failWith{errs[r]};
    std::vector<float> x(4096, 1.0f);
    std::thread call([&, c, r] {
      auto t0 = std::chrono::steady_clock::now();
      hung[r] = recclAllReduce(x.data(), x.data(), x.size(), recclFloat32, recclSum, c, nullptr);
      hungErr[r] = recclGetLastError(nullptr);
      hungSeconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // inside the allreduce by then
    if (r == 1)  // after rank 0's (bounded: a missing revoke fails below, not here)
      waitUntil(rank0Revoked);
    recclResult_t rc = recclCommRevoke(c, RECCL_REVOKE_DEFAULT);
    if (r == 0) rank0Revoked.store(true);
    // Quiet once the stopped allreduce has returned: in progress until then, never an error.
    recclResult_t async = recclInProgress;
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         rc == recclSuccess && async == recclInProgress && std::chrono::steady_clock::now() < until;) {
      if (recclCommGetAsyncError(c, &async) != recclSuccess) async = recclInternalError;
      if (async == recclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    call.join();
    if (rc != recclSuccess) return failWith(rc, std::string("revoke: ") + recclGetLastError(nullptr));
    if (async != recclSuccess)
      return failWith(async, std::string("async error after the revoke: ") + recclGetErrorString(async));

    // Refused by name on the revoked parent; the inspecting calls still answer.
    auto refused = [&](recclResult_t got, recclResult_t want, const char* needle, const char* what) -> bool {
      std::string msg = recclGetLastError(nullptr);
      if (got == want && msg.find(needle) != std::string::npos) return true;
      errs[r] = std::string(what) + ": " + recclGetErrorString(got) + " (" + msg + ")";
      return false;
    };
    recclRedOp_t mulsum{};
    float half = 0.5f;
    int cn = 0;
    if (!refused(recclAllReduce(x.data(), x.data(), x.size(), recclFloat32, recclSum, c, nullptr), recclInvalidUsage,
                 "revoked", "an allreduce after the revoke") ||
        !refused(recclSend(x.data(), 1, recclFloat32, 1 - r, c, nullptr), recclInvalidUsage, "revoked",
                 "a send after the revoke") ||
        !refused(recclRedOpCreatePreMulSum(&mulsum, &half, recclFloat32, recclScalarHostImmediate, c),
                 recclInvalidUsage, "revoked", "a PreMulSum op after the revoke") ||
        !refused(recclCommFinalize(c), recclInvalidUsage, "revoked", "finalize after the revoke") ||
        !refused(recclCommRevoke(c, 1), recclInvalidArgument, "revokeFlags: 1", "revoke with flag 1"))
      return recclInternalError;
    if (recclCommRevoke(c, RECCL_REVOKE_DEFAULT) != recclSuccess) return failWith(recclInternalError, "second revoke");
    if (recclCommCount(c, &cn) != recclSuccess || cn != n) return failWith(recclInternalError, "count after the revoke");

    int two = 2;
    recclComm_t child = nullptr;
    rc = recclCommShrink(c, &two, 1, &child, nullptr, RECCL_SHRINK_DEFAULT);
    if (rc != recclSuccess) return failWith(rc, std::string("shrink: ") + recclGetLastError(c));
    std::vector<int32_t> v(1000, r + 1);
    rc = recclAllReduce(v.data(), v.data(), v.size(), recclInt32, recclSum, child, nullptr);
    if (rc == recclSuccess && std::count(v.begin(), v.end(), 3) != static_cast<long>(v.size()))
      rc = failWith(recclInternalError, "child allreduce: " + std::to_string(v[999]));
    recclCommDestroy(child);
    return rc;
  });
  EXPECT_EQ(hung[0], recclAborted) << "rank 0: the hung allreduce: " << hungErr[0];
  EXPECT_NE(hungErr[0].find("revoked"), std::string::npos) << "rank 0: " << hungErr[0];
  EXPECT_NE(hung[1], recclSuccess) << "rank 1: the hung allreduce did not fail: " << hungErr[1];
  for (int r : {0, 1}) {
    EXPECT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << errs[r];
    EXPECT_LT(hungSeconds[r], 10.0) << "rank " << r << ": the revoke did not end the hung allreduce";
    // A revoked communicator closes without an error of its own.
    EXPECT_EQ(recclCommDestroy(world[r]), recclSuccess) << "rank " << r << ": " << recclGetLastError(nullptr);
    world.forget(r);
  }
}

// The child's state after a non-blocking call: polled until it is no longer in progress (30 s at
// most); its message, when it failed, in *msg.
recclResult_t settled(recclComm_t child, std::string* msg) {
  recclResult_t async = recclInProgress;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       async == recclInProgress && std::chrono::steady_clock::now() < until;) {
    if (recclResult_t rc = recclCommGetAsyncError(child, &async); rc) return rc;
    if (async == recclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (async != recclSuccess) *msg = recclGetLastError(child);
  return async;
}

// A non-blocking config (NCCL's ncclCommShrink with blocking = 0): the call returns
// recclInProgress with the child's handle before the handover, which goes on on the child's init
// thread; the child reports it through recclCommGetAsyncError.
// - Rank 1's call returns before the leader (rank 0) even calls: rank 0 waits for it, so a call
//   that waited for the leader's note would never return (rank 0 gives up after 10 s).
// - A handover whose leader never comes fails on the child (the parent's shrink serials go on).
// - A parent aborted while its non-blocking handover waits ends the handover at once; so does an
//   abort of the child, which lets the parent go.
TEST(Shrink, NonBlockingReturnsBeforeTheHandover) {
  const int n = 3;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<std::string> errs(n);
  std::atomic<bool> rank1Returned{false};
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    const Failer failWith{errs[r]};
    if (r == 2) return recclSuccess;  // excluded
    recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    int two = 2;
    if (r == 0)
      waitUntil(rank1Returned);
    recclComm_t child = nullptr;
    recclResult_t rc = recclCommShrink(c, &two, 1, &child, &cfg, RECCL_SHRINK_DEFAULT);
    if (r == 1) rank1Returned.store(true);
    if (rc != recclInProgress || !child)
      return failWith(rc == recclInProgress ? recclInternalError : rc,
                      std::string("shrink returned ") + recclGetErrorString(rc) + " (" + recclGetLastError(c) + ")");
    if (r == 0 && !rank1Returned.load()) return failWith(recclInternalError, "rank 1's shrink did not return");
    std::string msg;
    if (rc = settled(child, &msg); rc) {
      recclCommDestroy(child);
      return failWith(rc, "the child: " + msg);
    }
    std::vector<int32_t> v(1000, r + 1);
    rc = recclAllReduce(v.data(), v.data(), v.size(), recclInt32, recclSum, child, nullptr);
    if (rc == recclSuccess && std::count(v.begin(), v.end(), 3) != static_cast<long>(v.size()))
      rc = failWith(recclInternalError, "child allreduce: " + std::to_string(v[999]));
    recclCommDestroy(child);
    return rc;
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << errs[r];

  // Rank 0, the leader of a shrink that leaves rank 2 out, never calls: ranks 1's child fails
  // with the handover's timeout, naming the leader.
  {
    recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.bootstrapTimeoutMs = 1000;
    int two = 2;
    recclComm_t child = nullptr;
    ASSERT_EQ(recclCommShrink(world[1], &two, 1, &child, &cfg, RECCL_SHRINK_DEFAULT), recclInProgress)
        << recclGetLastError(nullptr);
    std::string msg;
    EXPECT_EQ(settled(child, &msg), recclTimeout) << msg;
    EXPECT_NE(msg.find("no word from rank 0"), std::string::npos) << msg;
    EXPECT_EQ(recclCommDestroy(child), recclSuccess) << recclGetLastError(nullptr);
  }
  // The same with a deadline far off: aborting the parent ends the handover, and the child fails
  // at once.
  {
    recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.bootstrapTimeoutMs = 120000;
    int two = 2;
    recclComm_t child = nullptr;
    ASSERT_EQ(recclCommShrink(world[1], &two, 1, &child, &cfg, RECCL_SHRINK_DEFAULT), recclInProgress)
        << recclGetLastError(nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // waiting for the note by then
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(recclCommAbort(world[1]), recclSuccess) << recclGetLastError(nullptr);
    world.forget(1);
    std::string msg;
    EXPECT_EQ(settled(child, &msg), recclAborted) << msg;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0)
        << "the parent's abort did not end its child's handover";
    EXPECT_EQ(recclCommDestroy(child), recclSuccess) << recclGetLastError(nullptr);
  }
  // Aborting the child instead ends its handover too, and with it the handover's hold on the
  // parent: a revoked parent is quiet again (recclCommGetAsyncError: recclSuccess) at once, not
  // after the handover's deadline.
  {
    ASSERT_EQ(recclCommRevoke(world[2], RECCL_REVOKE_DEFAULT), recclSuccess) << recclGetLastError(nullptr);
    recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.bootstrapTimeoutMs = 120000;
    int one = 1;
    recclComm_t child = nullptr;
    ASSERT_EQ(recclCommShrink(world[2], &one, 1, &child, &cfg, RECCL_SHRINK_DEFAULT), recclInProgress)
        << recclGetLastError(nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    recclResult_t async = recclInternalError;
    ASSERT_EQ(recclCommGetAsyncError(world[2], &async), recclSuccess);
    EXPECT_EQ(async, recclInProgress) << "the parent is quiet while its child's handover holds it";
    EXPECT_EQ(recclCommAbort(child), recclSuccess) << recclGetLastError(nullptr);
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
         async == recclInProgress && std::chrono::steady_clock::now() < until;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      ASSERT_EQ(recclCommGetAsyncError(world[2], &async), recclSuccess);
    }
    EXPECT_EQ(async, recclSuccess) << "the child's abort left its handover holding the parent";
  }
}

// A parent destroyed right after a non-blocking shrink returned: the destroy waits for the
// handover under way, as for any call inside the parent, so the child still forms (the leader
// calls only after the destroy began). Two such shrinks of the same list on one parent, the
// second while the first's handover waits, both form too: a call that went on claims its note,
// which the later one's sweep of given-up notes leaves (Shrink.ALaterTakeSparesAClaimedNote...).
TEST(Shrink, NonBlockingHandoversOutliveADestroyAndEachOther) {
  const int n = 3;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<std::string> errs(n);
  std::atomic<bool> rank1Destroying{false};
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    const Failer failWith{errs[r]};
    if (r == 2) return recclSuccess;  // excluded
    recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    int two = 2;
    if (r == 0) {
      waitUntil(rank1Destroying);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // inside rank 1's destroy by then
    }
    recclComm_t child[2] = {nullptr, nullptr};
    for (recclComm_t& ch : child)
      if (recclResult_t rc = recclCommShrink(c, &two, 1, &ch, &cfg, RECCL_SHRINK_DEFAULT); rc != recclInProgress)
        return failWith(rc, std::string("shrink: ") + recclGetLastError(c));
    if (r == 1) {
      rank1Destroying.store(true);
      if (recclResult_t rc = recclCommDestroy(c); rc)
        return failWith(rc, std::string("destroy: ") + recclGetLastError(nullptr));
    }
    recclResult_t rc = recclSuccess;
    for (int k = 0; k < 2 && rc == recclSuccess; ++k) {
      std::string msg;
      if (recclResult_t s = settled(child[k], &msg); s) {
        rc = failWith(s, "child " + std::to_string(k) + ": " + msg);
        break;
      }
      std::vector<int32_t> v(500, r + 1);
      if (recclResult_t s = recclAllReduce(v.data(), v.data(), v.size(), recclInt32, recclSum, child[k], nullptr); s)
        rc = failWith(s, "child " + std::to_string(k) + " allreduce: " + recclGetLastError(child[k]));
      else if (v[499] != 3)
        rc = failWith(recclInternalError, "child allreduce gave " + std::to_string(v[499]));
    }
    for (recclComm_t ch : child)
      if (ch) recclCommDestroy(ch);
    return rc;
  });
  world.forget(1);  // destroyed above
  for (int r = 0; r < n; ++r) EXPECT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << errs[r];
}

// The order two non-blocking shrinks' takes come in is their threads' to choose: with both of a
// list's notes arrived from the leader, the later serial's take may run first. Its sweep of
// notes meant for calls this rank gave up must spare the earlier one's, claimed since its call
// went on; a serial whose call was refused (no claim) has its note dropped. Ranks as threads,
// at the notes' level: the order is set here, not left to the scheduler.
TEST(Shrink, ALaterTakeSparesAClaimedNoteAndDropsAGivenUpOne) {
  Comms world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  reccl::core::Comm* leader = reccl::api::commImpl(world[0]);
  reccl::core::Comm* taker = reccl::api::commImpl(world[1]);
  const auto digest = reccl::core::Comm::shrinkDigest({});
  auto noteOf = [&](uint32_t serial) {
    reccl::core::ShrinkNote n;
    n.nranks = 2;
    n.excluded = digest;
    n.id.port = 1;
    n.id.jobId = 1000 + serial;  // tells the notes apart
    return n;
  };
  auto takeJob = [&](uint32_t serial, int64_t ms) -> uint64_t {
    auto got = taker->takeShrinkNote(digest, serial, 0, reccl::Deadline::afterMs(ms));
    return got.ok() ? got->id.jobId : 0;
  };
  const uint32_t kept = 1, givenUp = 2, later = 3;
  const reccl::core::Comm::ShrinkClaim claimKept(*taker, digest, kept);
  for (uint32_t s : {kept, givenUp, later}) {
    const reccl::Status st = leader->sendShrinkNote(1, s, noteOf(s), reccl::Deadline::afterMs(10000));
    ASSERT_TRUE(st.ok()) << "note " << s << ": " << st.message();
  }
  {
    const reccl::core::Comm::ShrinkClaim claimLater(*taker, digest, later);
    EXPECT_EQ(takeJob(later, 10000), 1000u + later);
  }
  EXPECT_EQ(takeJob(kept, 2000), 1000u + kept) << "the later take dropped a claimed note";
  EXPECT_EQ(takeJob(givenUp, 300), 0u) << "the later take kept a given-up call's note";
}

// Only the handover needs the parent: an abort of the parent from a watchdog thread while a
// blocking shrink (or a revoked parent's split) waits at the child's rendezvous (for rank 2,
// which took its note but never calls) returns at once, where it would wait for the call to end
// (8 s).
void abortDoesNotWaitForTheChildsInit(bool split) {
  const int n = 3;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<std::string> errs(n);
  std::vector<double> abortSeconds(n, 0);
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    if (split && recclCommRevoke(c, RECCL_REVOKE_DEFAULT) != recclSuccess) {
      errs[r] = "revoke";
      return recclInternalError;
    }
    if (r == 2) return recclSuccess;  // its listener takes the note; it never calls
    recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
    cfg.bootstrapTimeoutMs = 8000;
    recclResult_t abortRc = recclInternalError;
    std::thread watchdog([&, c, r] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // past the handover by then
      auto t0 = std::chrono::steady_clock::now();
      abortRc = recclCommAbort(c);
      abortSeconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    recclComm_t child = nullptr;
    recclResult_t rc = split ? recclCommSplit(c, 0, r, &child, &cfg)
                             : recclCommShrink(c, nullptr, 0, &child, &cfg, RECCL_SHRINK_DEFAULT);
    watchdog.join();
    if (child) recclCommDestroy(child);
    if (rc == recclSuccess) {
      errs[r] = "the call succeeded without rank 2";
      return recclInternalError;
    }
    if (abortRc != recclSuccess) errs[r] = std::string("abort: ") + recclGetErrorString(abortRc);
    return abortRc;
  });
  for (int r : {0, 1}) {
    world.forget(r);  // aborted
    EXPECT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << errs[r];
    EXPECT_LT(abortSeconds[r], 4.0) << "rank " << r << ": the abort waited for the child's init";
  }
}

TEST(Shrink, AbortOfTheParentDoesNotWaitForTheChildsInit) { abortDoesNotWaitForTheChildsInit(false); }

// NCCL's way on after ncclCommRevoke: a split of the revoked communicator. Its connections are
// failed, so the exchange runs over a communicator of all its ranks made through the shrink's
// handover. Two splits in a row (colors by parity, keys reversed; then one rank without a color),
// each child's ranks in key order and its allreduce exact; a split where one rank's config is bad
// fails on every rank, naming it; a later shrink of the same parent still works.
TEST(Shrink, RevokedParentSplits) {
  const int n = 4;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<std::string> errs(n);
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    const Failer failWith{errs[r]};
    if (recclResult_t rc = recclCommRevoke(c, RECCL_REVOKE_DEFAULT); rc)
      return failWith(rc, std::string("revoke: ") + recclGetLastError(nullptr));
    // One child: checks its size, this rank's place in key order, and an allreduce of parent ranks.
    auto check = [&](recclComm_t child, const std::vector<int>& members, const char* what) -> recclResult_t {
      int cn = 0, cr = -1;
      recclCommCount(child, &cn);
      recclCommUserRank(child, &cr);
      const auto at = std::find(members.begin(), members.end(), r) - members.begin();
      if (cn != static_cast<int>(members.size()) || cr != at)
        return failWith(recclInternalError, std::string(what) + ": rank " + std::to_string(cr) + " of " +
                                                std::to_string(cn) + ", want " + std::to_string(at) + " of " +
                                                std::to_string(members.size()));
      std::vector<int64_t> v(3001, r + 1);
      recclResult_t rc = recclAllReduce(v.data(), v.data(), v.size(), recclInt64, recclSum, child, nullptr);
      int64_t want = 0;
      for (int m : members) want += m + 1;
      if (rc != recclSuccess) return failWith(rc, std::string(what) + ": allreduce: " + recclGetLastError(child));
      if (std::count(v.begin(), v.end(), want) != static_cast<long>(v.size()))
        return failWith(recclInternalError, std::string(what) + ": allreduce gave " + std::to_string(v[0]) +
                                                ", want " + std::to_string(want));
      return recclSuccess;
    };
    recclComm_t child = nullptr;
    if (recclResult_t rc = recclCommSplit(c, r % 2, -r, &child, nullptr); rc)
      return failWith(rc, std::string("first split: ") + recclGetLastError(nullptr));
    recclResult_t rc = check(child, r % 2 ? std::vector<int>{3, 1} : std::vector<int>{2, 0}, "first split");
    recclCommDestroy(child);
    if (rc) return rc;

    child = nullptr;
    if (rc = recclCommSplit(c, r == 1 ? RECCL_SPLIT_NOCOLOR : 7, r, &child, nullptr); rc)
      return failWith(rc, std::string("second split: ") + recclGetLastError(nullptr));
    if (r == 1) {
      if (child) return failWith(recclInternalError, "second split: a communicator for RECCL_SPLIT_NOCOLOR");
    } else {
      rc = check(child, {0, 2, 3}, "second split");
      recclCommDestroy(child);
      if (rc) return rc;
    }

    // Rank 2's config is bad: every rank's call fails, the others naming rank 2.
    recclConfig_t bad = RECCL_CONFIG_INITIALIZER;
    bad.nChannels = 99;
    child = nullptr;
    rc = recclCommSplit(c, 0, r, &child, r == 2 ? &bad : nullptr);
    std::string msg = recclGetLastError(nullptr);
    if (child) recclCommDestroy(child);
    if (rc == recclSuccess) return failWith(recclInternalError, "a split with rank 2's bad config succeeded");
    if (r == 2 ? msg.find("nChannels") == std::string::npos : msg.find("rank 2 of comm passed a bad config") == std::string::npos)
      return failWith(recclInternalError, "the bad-config split's message: " + msg);

    child = nullptr;
    int three = 3;
    if (r == 3) return recclSuccess;  // excluded from the shrink that follows
    if (rc = recclCommShrink(c, &three, 1, &child, nullptr, RECCL_SHRINK_DEFAULT); rc)
      return failWith(rc, std::string("shrink after the splits: ") + recclGetLastError(c));
    rc = check(child, {0, 1, 2}, "shrink after the splits");
    recclCommDestroy(child);
    return rc;
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << errs[r];
}

// Revoked splits that fail leave nothing that a later shrink takes for its own, and pair the same
// calls on every rank afterwards. Rank 0 revokes, rank 1 not (yet):
// - rank 1's split is refused at once (null newcomm) while rank 0's waits and fails: rank 0's note
//   stays with rank 1's listener, and the shrink that follows, of the same serial, is not taken
//   for that split;
// - both split: both calls fail (rank 1's exchange runs over the comm rank 0's revoke broke, rank
//   0 waits for rank 1 at the exchange's rendezvous); after rank 1's revoke, the next split pairs
//   up on both.
TEST(Shrink, RevokedSplitsPairTheSameCallsAfterAFailedOne) {
  ScopedEnv timeout("RECCL_TIMEOUT_MS", "3000");
  const int n = 2;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<std::string> errs(n);
  std::atomic<int> met[2] = {0, 0};
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    const Failer failWith{errs[r]};
    // Both ranks past a failed call before the next one (30 s at most): its waits have ended.
    auto meet = [&](int phase) {
      met[phase].fetch_add(1);
      for (int i = 0; i < 3000 && met[phase].load() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    };
    recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
    cfg.bootstrapTimeoutMs = 1500;
    auto splitAndCheck = [&](const char* what) -> recclResult_t {
      recclComm_t child = nullptr;
      if (recclResult_t rc = recclCommSplit(c, 0, r, &child, &cfg); rc)
        return failWith(rc, std::string(what) + ": " + recclGetLastError(nullptr));
      std::vector<int32_t> v(777, r + 1);
      recclResult_t rc = recclAllReduce(v.data(), v.data(), v.size(), recclInt32, recclSum, child, nullptr);
      if (rc == recclSuccess && std::count(v.begin(), v.end(), 3) != static_cast<long>(v.size()))
        rc = failWith(recclInternalError, std::string(what) + ": allreduce gave " + std::to_string(v[0]));
      else if (rc)
        rc = failWith(rc, std::string(what) + ": allreduce: " + recclGetLastError(child));
      recclCommDestroy(child);
      return rc;
    };
    if (r == 0 && recclCommRevoke(c, RECCL_REVOKE_DEFAULT) != recclSuccess) return failWith(recclInternalError, "revoke");
    // Rank 1's call refused, rank 0's waits for it in vain; the shrink after it has the same
    // serial as that split (each the first of its kind).
    recclComm_t child = nullptr;
    recclResult_t rc = recclCommSplit(c, 0, r, r == 1 ? nullptr : &child, &cfg);
    if (child) recclCommDestroy(child);
    if (rc == recclSuccess) return failWith(recclInternalError, "a split that rank 1 never joined succeeded");
    meet(0);
    child = nullptr;
    if (rc = recclCommShrink(c, nullptr, 0, &child, &cfg, RECCL_SHRINK_DEFAULT); rc)
      return failWith(rc, std::string("the shrink after a failed split: ") + recclGetLastError(c));
    recclCommDestroy(child);

    // Rank 0 revoked, rank 1 not.
    child = nullptr;
    if (recclCommSplit(c, 0, r, &child, &cfg) == recclSuccess) {
      recclCommDestroy(child);
      return failWith(recclInternalError, "a split with one rank revoked and one not succeeded");
    }
    meet(1);
    if (r == 1 && recclCommRevoke(c, RECCL_REVOKE_DEFAULT) != recclSuccess) return failWith(recclInternalError, "revoke");
    return splitAndCheck("the split after both revoked");
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << errs[r];
}

TEST(Shrink, AbortOfTheRevokedParentDoesNotWaitForTheSplitsExchange) { abortDoesNotWaitForTheChildsInit(true); }

// The revoke's refusals on one rank: a flag other than RECCL_REVOKE_DEFAULT, a null
// communicator, a finalized communicator.
TEST(Shrink, RevokeRefusals) {
  Comms world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  EXPECT_EQ(recclCommRevoke(nullptr, RECCL_REVOKE_DEFAULT), recclInvalidArgument);
  EXPECT_EQ(recclCommRevoke(world[0], -1), recclInvalidArgument);
  EXPECT_NE(std::string(recclGetLastError(nullptr)).find("revokeFlags: -1"), std::string::npos)
      << recclGetLastError(nullptr);
  auto rcs = world.run([&](int, recclComm_t c) { return recclCommFinalize(c); });
  ASSERT_EQ(rcs[0], recclSuccess);
  ASSERT_EQ(rcs[1], recclSuccess);
  EXPECT_EQ(recclCommRevoke(world[0], RECCL_REVOKE_DEFAULT), recclInvalidUsage);
  EXPECT_NE(std::string(recclGetLastError(nullptr)).find("finalized"), std::string::npos)
      << recclGetLastError(nullptr);
}

}  // namespace
