#include "reccl/inject/precise_wait.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include "reccl/common/log.h"

namespace reccl::inject {

namespace {

constexpr int64_t kNsPerSec = 1'000'000'000;
// Below this much time left, stop polling the stop fd and sleep precisely.
constexpr int64_t kCoarseMarginNs = 2'000'000;

int64_t nowNs(clockid_t clk) noexcept {
  timespec ts{};
  clock_gettime(clk, &ts);
  return ts.tv_sec * kNsPerSec + ts.tv_nsec;
}

bool readable(int fd, int timeoutMs) noexcept {
  pollfd p{fd, POLLIN, 0};
  int n = ::poll(&p, 1, timeoutMs);
  return n > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

}  // namespace

int64_t monotonicNs() noexcept { return nowNs(CLOCK_MONOTONIC); }
int64_t realtimeNs() noexcept { return nowNs(CLOCK_REALTIME); }

WaitResult waitUntil(int64_t deadline, int stopFd, int64_t spinNs) noexcept {
  if (spinNs < 0) spinNs = 0;
  for (;;) {
    int64_t remain = deadline - monotonicNs();
    if (stopFd >= 0 && remain > kCoarseMarginNs) {
      int ms = static_cast<int>((remain - kCoarseMarginNs) / 1'000'000);
      if (ms > 1000) ms = 1000;
      if (readable(stopFd, ms < 1 ? 1 : ms)) return WaitResult::kStopped;
      continue;
    }
    if (stopFd >= 0 && readable(stopFd, 0)) return WaitResult::kStopped;
    if (remain <= spinNs) break;
    int64_t wake = deadline - spinNs;
    timespec ts{wake / kNsPerSec, wake % kNsPerSec};
    int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
    if (rc == 0) break;
    if (rc != EINTR) break;
  }
  while (monotonicNs() < deadline) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  return WaitResult::kReached;
}

TimingPriority::TimingPriority(bool realtime) noexcept {
  oldSlack_ = static_cast<unsigned long>(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  sched_param old{};
  pthread_getschedparam(pthread_self(), &oldPolicy_, &old);
  oldPriority_ = old.sched_priority;
  if (!realtime) return;
  // A modest priority: above every normal task, below the kernel's own RT threads.
  sched_param p{};
  p.sched_priority = 10;
  int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
  if (rc == 0) fifo_ = true;
  else RECCL_INFO(kLogInject, "SCHED_FIFO not permitted (%s), timing with SCHED_OTHER", std::strerror(rc));
}

TimingPriority::~TimingPriority() {
  if (fifo_) {
    sched_param p{};
    p.sched_priority = oldPriority_;
    pthread_setschedparam(pthread_self(), oldPolicy_, &p);
  }
  prctl(PR_SET_TIMERSLACK, oldSlack_, 0, 0, 0);
}

}  // namespace reccl::inject
