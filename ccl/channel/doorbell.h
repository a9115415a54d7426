// A futex-backed wake-up word that works between threads and between processes (it may live in
// shared memory, so it uses the non-private futex). A waiter samples seq(), checks its condition,
// and sleeps only while seq() is unchanged; a ringer changes the condition first, then rings.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace reccl::channel {

struct Doorbell {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> waiters{0};

  uint32_t sample() const noexcept { return seq.load(std::memory_order_acquire); }
  void ring() noexcept;
  // Sleeps until seq != seen or `timeout` passes (spurious returns allowed).
  void sleep(uint32_t seen, std::chrono::nanoseconds timeout) noexcept;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

}  // namespace reccl::channel
