#include "failover/migration/migrator_queue.h"

namespace reccl::failover {

void MigratorQueue::pushPassive(PassiveHello p) {
  {
    std::lock_guard lk(mu_);
    passive_.push_back(std::move(p));
  }
  cv_.notify_one();
}

void MigratorQueue::pushJob(Job j) {
  {
    std::lock_guard lk(mu_);
    (j.reason == MigrateReason::kStandby ? standbys_ : moves_).push_back(std::move(j));
  }
  cv_.notify_one();
}

std::optional<MigratorWork> MigratorQueue::take(const std::function<bool()>& stopping, bool* startAnother) {
  std::unique_lock lk(mu_);
  ++idle_;
  auto standbyReady = [&] { return !standbys_.empty() && standbysRunning_ < kStandbysAtOnce; };
  cv_.wait(lk, [&] { return stopping() || !passive_.empty() || !moves_.empty() || standbyReady(); });
  --idle_;
  *startAnother = false;
  if (stopping()) return std::nullopt;
  MigratorWork w;
  if (!passive_.empty()) {
    w.passive.emplace(std::move(passive_.front()));
    passive_.pop_front();
  } else if (!moves_.empty()) {
    w.job = std::move(moves_.front());
    moves_.pop_front();
  } else {
    w.job = std::move(standbys_.front());
    standbys_.pop_front();
    ++standbysRunning_;
  }
  *startAnother = idle_ == 0;
  return w;
}

void MigratorQueue::standbyDone() {
  bool next;
  {
    std::lock_guard lk(mu_);
    --standbysRunning_;
    next = !standbys_.empty();
  }
  if (next) cv_.notify_one();
}

void MigratorQueue::wakeAll() noexcept {
  {
    std::lock_guard lk(mu_);  // a thread between its stop check and its wait sees the notify
  }
  cv_.notify_all();
}

}  // namespace reccl::failover
