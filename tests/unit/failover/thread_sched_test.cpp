// The failover threads' scheduling (thread_sched.h) on real threads: a thread started by a FIFO
// thread inherits FIFO, and dropToNormalScheduling takes it back to SCHED_OTHER; a slice request
// is read back from the kernel, inherited the same way and dropped too. Raising to FIFO needs
// CAP_SYS_NICE (root here); skipped where refused. Slices need an EEVDF kernel (6.12+); skipped
// where the kernel ignores them.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

#include "failover/thread_sched.h"

namespace {

using reccl::failover::dropToNormalScheduling;
using reccl::failover::raiseToFifo;
using reccl::failover::requestSlice;

int policyOfThisThread() {
  int policy = -1;
  sched_param sp{};
  pthread_getschedparam(pthread_self(), &policy, &sp);
  return policy;
}

TEST(FailoverThreadSched, AThreadStartedAtFifoDropsBackToNormal) {
  int child = -1, childAfterDrop = -1, parent = -1;
  bool raised = true;
  std::thread t([&] {
    if (!raiseToFifo(10).ok()) {
      raised = false;
      return;
    }
    parent = policyOfThisThread();
    std::thread c([&] {
      child = policyOfThisThread();  // inherited from its FIFO parent
      dropToNormalScheduling();
      childAfterDrop = policyOfThisThread();
    });
    c.join();
  });
  t.join();
  if (!raised) GTEST_SKIP() << "SCHED_FIFO refused here (needs CAP_SYS_NICE)";
  EXPECT_EQ(parent, SCHED_FIFO);
  EXPECT_EQ(child, SCHED_FIFO) << "a thread started by a FIFO thread inherits FIFO: why the drop is needed";
  EXPECT_EQ(childAfterDrop, SCHED_OTHER);
}

TEST(FailoverThreadSched, OnlyARealTimePolicyIsDropped) {
  // SCHED_BATCH is not real time (and needs no privilege): a thread that chose it keeps it.
  std::thread t([] {
    sched_param sp{};
    ASSERT_EQ(pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp), 0);
    dropToNormalScheduling();
    EXPECT_EQ(policyOfThisThread(), SCHED_BATCH);
  });
  t.join();
}

TEST(FailoverThreadSched, AnInvalidPriorityIsAnError) {
  std::thread t([] {
    reccl::Status s = raiseToFifo(0);  // FIFO needs 1-99
    EXPECT_EQ(s.code(), reccl::Errc::kInvalidArgument);
    EXPECT_NE(s.message().find("SCHED_FIFO 0"), std::string::npos) << s.message();
    EXPECT_EQ(policyOfThisThread(), SCHED_OTHER);
  });
  t.join();
}

// The slice the kernel gives this thread (sched_getattr's sched_runtime at a fair policy).
uint64_t sliceOfThisThread() {
  struct {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t prio;
    uint64_t runtime, deadline, period;
  } a{};
  if (syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) != 0) return 0;
  return a.runtime;
}

TEST(FailoverThreadSched, ASliceIsReadBackInheritedAndDropped) {
  uint64_t before = 0, after = 0, child = 0, childAfterDrop = 0;
  int niceBefore = 0, niceAfter = 0;
  reccl::Status s;
  std::thread t([&] {
    pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
    ASSERT_EQ(setpriority(PRIO_PROCESS, tid, 5), 0);  // raising nice needs no privilege
    niceBefore = getpriority(PRIO_PROCESS, tid);
    before = sliceOfThisThread();
    s = requestSlice(300'000);
    if (!s.ok()) return;
    after = sliceOfThisThread();
    niceAfter = getpriority(PRIO_PROCESS, tid);
    std::thread c([&] {
      child = sliceOfThisThread();
      dropToNormalScheduling();
      childAfterDrop = sliceOfThisThread();
    });
    c.join();
  });
  t.join();
  if (s.code() == reccl::Errc::kUnsupported) GTEST_SKIP() << s.message();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_NE(before, 300'000u) << "the default slice should differ from the one asked for";
  EXPECT_EQ(after, 300'000u);
  EXPECT_EQ(niceAfter, niceBefore) << "a slice request keeps the thread's nice value";
  EXPECT_EQ(child, 300'000u) << "a thread started by one with a short slice inherits it: why the drop is needed";
  EXPECT_EQ(childAfterDrop, before) << "dropped back to the kernel's default slice";
}

TEST(FailoverThreadSched, ASliceOutOfRangeOrAtFifoIsAnError) {
  std::thread t([] {
    uint64_t before = sliceOfThisThread();
    reccl::Status s = requestSlice(50'000);
    EXPECT_EQ(s.code(), reccl::Errc::kInvalidArgument);
    EXPECT_NE(s.message().find("100 us to 100 ms"), std::string::npos) << s.message();
    EXPECT_EQ(requestSlice(200'000'000).code(), reccl::Errc::kInvalidArgument);
    EXPECT_EQ(sliceOfThisThread(), before) << "a refused request changes nothing";
    if (!raiseToFifo(10).ok()) return;  // the FIFO half needs CAP_SYS_NICE
    s = requestSlice(300'000);
    EXPECT_EQ(s.code(), reccl::Errc::kInvalidArgument);
    EXPECT_NE(s.message().find("not at SCHED_OTHER"), std::string::npos) << s.message();
    EXPECT_EQ(policyOfThisThread(), SCHED_FIFO) << "a slice request never changes the policy";
  });
  t.join();
}

}  // namespace
