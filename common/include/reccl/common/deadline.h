// Every wait in reccl has a deadline. Deadline wraps a CLOCK_MONOTONIC instant.
#pragma once

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

class Deadline {
 public:
  static Deadline after(std::chrono::nanoseconds d) { return Deadline(Clock::now() + d); }
  static Deadline afterMs(int64_t ms) { return after(std::chrono::milliseconds(ms)); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }

  bool expired() const { return at_ != Clock::time_point::max() && Clock::now() >= at_; }
  Clock::time_point at() const { return at_; }
  // Milliseconds left, clamped to [0, INT32_MAX]; -1 for never (poll/epoll convention).
  int remainingMsForPoll() const;

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

inline int Deadline::remainingMsForPoll() const {
  if (at_ == Clock::time_point::max()) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT32_MAX ? INT32_MAX : static_cast<int>(left);
}

}  // namespace reccl
