// Closing a communicator (recclCommDestroy, recclCommAbort) beside calls on other threads, and
// what a closed handle answers (api/comm_handle.h, "Closing"): the close frees nothing while a
// call is inside, a second close or a late call is refused by name, and once it returned the
// transport no longer writes into a failed call's buffers. Also under the sanitizers.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
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

// The calling thread's own network namespace (threads it starts go with it, the ranks' and the
// library's included): lo up with a 1500-byte MTU and its egress slowed to `rate` by a token
// bucket. An empty string on success, else why not.
std::string slowLoopback(const std::string& rate) {
  if (unshare(CLONE_NEWNET) != 0) return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
  const std::string cmd = "ip link set lo mtu 1500 up && tc qdisc add dev lo root tbf rate " + rate +
                          " burst 16kb latency 2s >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return "could not slow lo with a tbf qdisc (needs ip and tc, sch_tbf)";
  return "";
}

// A receive buffer the test watches through a second mapping of the same pages. What the
// transport writes into a failed call's buffer is not ordered with the call's return (the reason
// a close waits for it), so the test's looks at it are unordered too by design: through their own
// addresses ThreadSanitizer takes them for what they are, an outside view, and still checks the
// library's own threads.
class WatchedBuffer {
 public:
  explicit WatchedBuffer(size_t count) : count_(count) {
    const int fd = memfd_create("reccl-close-test", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes())) != 0) {
      if (fd >= 0) close(fd);
      return;
    }
    void* a = mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    void* b = mmap(nullptr, bytes(), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (a != MAP_FAILED) data_ = static_cast<float*>(a);
    if (b != MAP_FAILED) view_ = static_cast<const float*>(b);
  }
  ~WatchedBuffer() {
    if (data_) munmap(data_, bytes());
    if (view_) munmap(const_cast<float*>(view_), bytes());
  }
  WatchedBuffer(const WatchedBuffer&) = delete;
  WatchedBuffer& operator=(const WatchedBuffer&) = delete;
  bool ok() const { return data_ && view_; }
  float* data() { return data_; }  // what the call is given
  std::vector<float> look() const { return std::vector<float>(view_, view_ + count_); }
  // Waits up to `limit` for the buffer to differ from `was`.
  bool changesWithin(const std::vector<float>& was, Ms limit) const {
    for (auto until = Clock::now() + limit; Clock::now() < until; std::this_thread::sleep_for(Ms(5)))
      if (std::memcmp(view_, was.data(), bytes()) != 0) return true;
    return false;
  }
  // Waits `settle`, then whether the buffer stays as it was then for `watch`.
  bool quietAfter(Ms settle, Ms watch) const {
    std::this_thread::sleep_for(settle);
    return !changesWithin(look(), watch);
  }

 private:
  size_t bytes() const { return count_ * sizeof(float); }
  size_t count_;
  float* data_ = nullptr;
  const float* view_ = nullptr;
};

enum class Close { kAbort, kDestroy };

// A receive that fails while its peer's step is arriving straight into its buffer (lo slowed to
// 4 Mbit/s: a 512 KiB step takes about a second, against a 600 ms deadline for progress). The
// failure shuts the connection down, so once the I/O under way then has ended nothing more lands,
// although the peer's step is still on its way; and once the close returned, nothing at all
// (reccl.h: the close waits for that I/O). The test checks where the first step landed: without
// a step half-way into the buffer when the call fails, the later checks would hold for nothing.
void failedReceiveThenClose(Close how) {
  ScopedEnv t("RECCL_TIMEOUT_MS", "600");
  ScopedEnv tcp("RECCL_SHM_DISABLE", "1");
  ScopedEnv chunk("RECCL_CHUNK_SIZE", "512K");
  constexpr size_t kCount = size_t{1} << 20;  // 4 MiB of floats: eight steps
  constexpr size_t kStep = (size_t{512} << 10) / sizeof(float);
  std::string skip;
  std::string failure;
  std::thread job([&] {
    skip = slowLoopback("4mbit");
    if (!skip.empty()) return;
    std::optional<Comms> comms(std::in_place, 2);
    if (!comms->ok()) {
      failure = "init: " + comms->error();
      return;
    }
    float hello[2] = {1.0f, 0.0f};  // connects the ranks (a few bytes: quick even at the slowed rate)
    auto rcs = comms->run([&](int r, recclComm_t c) {
      return r == 0 ? recclSend(&hello[0], 1, recclFloat32, 1, c, nullptr)
                    : recclRecv(&hello[1], 1, recclFloat32, 0, c, nullptr);
    });
    if (rcs[0] != recclSuccess || rcs[1] != recclSuccess) {
      failure = "the ranks did not connect: " + lastError();
      return;
    }
    WatchedBuffer out(kCount);
    if (!out.ok()) {
      failure = std::string("cannot map the receive buffer twice: ") + std::strerror(errno);
      return;
    }
    std::fill(out.data(), out.data() + kCount, -1.0f);
    std::vector<float> in(kCount, 7.0f);
    std::thread sender([&] {
      // After the receive has named its buffer for the first steps, so that they land there.
      std::this_thread::sleep_for(Ms(200));
      recclSend(in.data(), kCount, recclFloat32, 0, (*comms)[1], nullptr);
    });
    const recclResult_t rc = recclRecv(out.data(), kCount, recclFloat32, 1, (*comms)[0], nullptr);
    const std::vector<float> atReturn = out.look();
    size_t landed = 0;
    while (landed < kCount && atReturn[landed] == 7.0f) ++landed;
    if (rc != recclTimeout) {
      failure = std::string("the receive was to time out on the slowed link, it returned ") + recclGetErrorString(rc);
    } else if (landed == 0 || landed >= kStep) {
      failure = "the first step was to be landing in the receive buffer when the call failed; " +
                std::to_string(landed) + " of its " + std::to_string(kStep) + " elements were there";
    } else if (!out.quietAfter(Ms(200), Ms(500))) {
      failure = "the receive buffer still changed 200 ms after the call failed: its connection was not shut down";
    } else {
      recclComm_t c = (*comms)[0];
      comms->forget(0);
      const recclResult_t closed = how == Close::kAbort ? recclCommAbort(c) : recclCommDestroy(c);
      const std::vector<float> seen = out.look();
      if (closed != recclSuccess) {
        failure = std::string("the close failed: ") + recclGetErrorString(closed) + ": " + lastError();
      } else if (out.changesWithin(seen, Ms(1000))) {
        const std::vector<float> now = out.look();
        size_t at = 0;
        while (at < kCount && std::memcmp(&now[at], &seen[at], sizeof(float)) == 0) ++at;
        failure = "the receive buffer changed after the close returned (first at element " + std::to_string(at) + ")";
      }
    }
    sender.join();
    comms.reset();
  });
  job.join();
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_TRUE(failure.empty()) << failure;
}

TEST(CclCloseInFlight, AbortLeavesAFailedReceivesBufferAlone) { failedReceiveThenClose(Close::kAbort); }
TEST(CclCloseInFlight, DestroyLeavesAFailedReceivesBufferAlone) { failedReceiveThenClose(Close::kDestroy); }

// A call's lazy connect through a NIC that is down, with failover off (RECCL_FAILOVER=0): it
// dials again and again (the network is unreachable) until RECCL_TIMEOUT_MS, 20 s here. A
// watchdog's abort meanwhile ends the call at once, with recclAborted and the abort's own words:
// the connect's deadline ends with its communicator.
TEST(CclCloseConnecting, AnAbortEndsALazyConnectThroughADownNicWithFailoverOff) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: a network namespace of its own with a veth NIC";
  ScopedEnv off("RECCL_FAILOVER", "0");
  ScopedEnv tcp("RECCL_SHM_DISABLE", "1");
  ScopedEnv nics("RECCL_NICS", "=nic0");
  ScopedEnv t("RECCL_TIMEOUT_MS", "20000");
  std::string skip;
  std::string failure;
  std::thread job([&] {
    if (unshare(CLONE_NEWNET) != 0) {
      skip = std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
      return;
    }
    if (std::system("ip link set lo up && ip link add nic0 type veth peer name nic0p && "
                    "ip addr add 10.123.0.1/24 dev nic0 && ip link set nic0p up && ip link set nic0 up") != 0) {
      skip = "could not make a veth NIC (needs ip and the veth driver)";
      return;
    }
    // Three ranks: init connects each to its ring neighbours (0->1, 1->2, 2->0); 0->2 is lazy.
    std::optional<Comms> comms(std::in_place, 3);
    if (!comms->ok()) {
      failure = "init: " + comms->error();
      return;
    }
    if (std::system("ip link set nic0 down") != 0) {
      failure = "could not take nic0 down";
      return;
    }
    float x = 1.0f;
    std::atomic<bool> returned{false};
    std::atomic<recclResult_t> rc{recclSuccess};
    std::string why;  // the call's last error, read on its thread before `returned`
    recclComm_t c = (*comms)[0];
    comms->forget(0);  // aborted below
    std::thread call([&] {
      rc = recclSend(&x, 1, recclFloat32, 2, c, nullptr);
      why = lastError();
      returned = true;
    });
    std::this_thread::sleep_for(Ms(1000));
    if (returned.load()) {
      failure = std::string("the send was to keep dialling through the down NIC; it returned ") +
                recclGetErrorString(rc.load()) + ": " + why;
      recclCommAbort(c);
    } else {
      const auto start = Clock::now();
      const recclResult_t aborted = recclCommAbort(c);
      while (!returned.load() && Clock::now() - start < Ms(10000)) std::this_thread::sleep_for(Ms(5));
      const auto took = std::chrono::duration_cast<Ms>(Clock::now() - start).count();
      if (aborted != recclSuccess)
        failure = std::string("the abort failed: ") + recclGetErrorString(aborted);
      else if (!returned.load())
        failure = "the send was still dialling 10 s after the abort (its deadline is 20 s)";
      else if (took > 3000)  // against the 20 s deadline, load included
        failure = "the send returned " + std::to_string(took) + " ms after the abort";
      else if (rc.load() != recclAborted)
        failure = std::string("the send returned ") + recclGetErrorString(rc.load()) + ", not recclAborted: " + why;
      else if (why.find("communicator aborted") == std::string::npos || why.find("init") != std::string::npos)
        failure = "the send's error does not say the communicator was aborted: " + why;
    }
    call.join();
    comms.reset();
  });
  job.join();
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_TRUE(failure.empty()) << failure;
}

}  // namespace
