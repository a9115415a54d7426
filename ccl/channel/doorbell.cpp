#include "channel/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>

namespace reccl::channel {

void Doorbell::ring() noexcept {
  seq.fetch_add(1, std::memory_order_seq_cst);
  if (waiters.load(std::memory_order_seq_cst) != 0)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

void Doorbell::sleep(uint32_t seen, std::chrono::nanoseconds timeout) noexcept {
  if (timeout.count() <= 0) return;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  waiters.fetch_add(1, std::memory_order_seq_cst);
  if (seq.load(std::memory_order_seq_cst) == seen)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq), FUTEX_WAIT, seen, &ts, nullptr, 0);
  waiters.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace reccl::channel
