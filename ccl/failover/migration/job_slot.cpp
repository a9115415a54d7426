#include "failover/migration/job_slot.h"

namespace reccl::failover {
namespace {

int strength(const Job& j) {
  if (j.reason == MigrateReason::kFailBack) return 0;
  return j.ifPath ? 1 : 2;
}

}  // namespace

bool JobSlot::claim(const Job& j) {
  std::lock_guard lk(mu_);
  if (!queued_.load(std::memory_order_relaxed)) {
    queued_.store(true, std::memory_order_release);
    return true;
  }
  if (!deferred_ || strength(j) >= strength(*deferred_)) deferred_ = j;
  return false;
}

std::optional<Job> JobSlot::finish() {
  std::lock_guard lk(mu_);
  std::optional<Job> next;
  next.swap(deferred_);
  if (!next) queued_.store(false, std::memory_order_release);
  return next;
}

bool jobMoot(const Job& j, const channel::Path* current, int rail) {
  if (j.ifPath && current != j.ifPath) return true;
  if (j.reason == MigrateReason::kFailBack) return rail == j.toRail;
  return j.fromRail >= 0 && rail != j.fromRail;
}

}  // namespace reccl::failover
