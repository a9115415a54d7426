// Every wait in reccl has a deadline. Deadline wraps a CLOCK_MONOTONIC instant.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>

namespace reccl {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC on Linux

inline uint64_t monotonicNs() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// A deadline may also end early: cancellable(flag) gives one that counts as expired once `flag`
// is set (an abort of the wait's owner; the flag outlives every wait on the deadline). A wait
// that polls looks at the flag every pollSliceMs(): rc 0 from such a poll is a timeout only once
// expired(), and cancelled() tells an abort from a timeout. A wait with two owners (a child
// communicator's handover, ended by an abort of the parent or of the child) makes a cancellable
// deadline cancellable again: either flag ends it.
class Deadline {
 public:
  static Deadline after(std::chrono::nanoseconds d) { return Deadline(Clock::now() + d); }
  static Deadline afterMs(int64_t ms) { return after(std::chrono::milliseconds(ms)); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  static constexpr int kCancelPollMs = 50;

  // Cancellable by `flag` too; at most two flags (a third replaces the second).
  Deadline cancellable(const std::atomic<bool>* flag) const {
    Deadline d = *this;
    (d.cancel_ ? d.cancel2_ : d.cancel_) = flag;
    return d;
  }
  // This deadline or `ms` from now, whichever comes first; cancellable as this one is.
  Deadline within(int64_t ms) const {
    Deadline d = *this;
    Clock::time_point t = Clock::now() + std::chrono::milliseconds(ms);
    if (t < d.at_) d.at_ = t;
    return d;
  }
  bool cancelled() const {
    return (cancel_ && cancel_->load(std::memory_order_acquire)) ||
           (cancel2_ && cancel2_->load(std::memory_order_acquire));
  }
  // No instant to reach: never(), or a deadline made from it by cancellable().
  bool isNever() const { return at_ == Clock::time_point::max(); }
  bool expired() const { return cancelled() || (!isNever() && Clock::now() >= at_); }
  Clock::time_point at() const { return at_; }
  // Milliseconds left, clamped to [0, INT32_MAX]; -1 for never (poll/epoll convention); 0 once
  // cancelled.
  int remainingMsForPoll() const;
  // What one poll on this deadline may wait: the time left, at most kCancelPollMs on a cancellable
  // deadline (0 once cancelled).
  int pollSliceMs() const;

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
  const std::atomic<bool>* cancel_ = nullptr;
  const std::atomic<bool>* cancel2_ = nullptr;
};

inline int Deadline::remainingMsForPoll() const {
  if (cancelled()) return 0;
  if (isNever()) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT32_MAX ? INT32_MAX : static_cast<int>(left);
}

inline int Deadline::pollSliceMs() const {
  int left = remainingMsForPoll();
  if (!cancel_) return left;
  if (cancelled()) return 0;
  return left < 0 || left > kCancelPollMs ? kCancelPollMs : left;
}

}  // namespace reccl
