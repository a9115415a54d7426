// The failover threads' scheduling (thread_sched.h) on real threads: a thread started by a FIFO
// thread inherits FIFO, and dropToNormalScheduling takes it back to SCHED_OTHER. Raising needs
// CAP_SYS_NICE (root here); skipped where refused.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <thread>

#include "failover/thread_sched.h"

namespace {

using reccl::failover::dropToNormalScheduling;
using reccl::failover::raiseToFifo;

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

}  // namespace
