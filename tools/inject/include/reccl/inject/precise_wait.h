// Waiting for an absolute CLOCK_MONOTONIC moment with sub-millisecond accuracy: an interruptible
// coarse wait (poll on a stop fd), then clock_nanosleep(TIMER_ABSTIME) to shortly before the
// moment, then a short spin, because a sleeping thread's wake-up latency on a busy VM is tens to
// hundreds of microseconds.
#pragma once

#include <cstdint>

namespace reccl::inject {

int64_t monotonicNs() noexcept;
int64_t realtimeNs() noexcept;

enum class WaitResult { kReached, kStopped };

// Returns kStopped as soon as stopFd (if >= 0) is readable; it is polled, never read.
WaitResult waitUntil(int64_t deadlineMonoNs, int stopFd, int64_t spinNs) noexcept;

// Makes the calling thread a better timer: 1 ns timer slack and, when permitted and asked for,
// SCHED_FIFO. The previous settings come back when the guard goes.
class TimingPriority {
 public:
  explicit TimingPriority(bool realtime) noexcept;
  ~TimingPriority();
  TimingPriority(const TimingPriority&) = delete;
  TimingPriority& operator=(const TimingPriority&) = delete;
  const char* policyName() const noexcept { return fifo_ ? "SCHED_FIFO" : "SCHED_OTHER"; }

 private:
  bool fifo_ = false;
  int oldPolicy_ = 0;
  int oldPriority_ = 0;
  unsigned long oldSlack_ = 0;
};

}  // namespace reccl::inject
