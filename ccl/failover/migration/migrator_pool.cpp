// The migrator threads and their queue. A rail fault moves every connection on it at once (both
// directions of each peer pair), and the far end takes each over: the jobs of both kinds run on
// pre-started migrator threads, so the connections' handshakes overlap instead of queueing (run
// one by one, the second commits a whole handshake after the first), and no thread is created on
// the fault's path. A thread that takes the last idle slot starts one more, so a job blocked in a
// connect never delays another; all are joined at stop.
#include <optional>

#include "failover/context.h"
#include "failover/migration/migration.h"
#include "failover/standby/standby.h"

namespace reccl::failover {

Migration::~Migration() { stop(); }

void Migration::start() {
  std::lock_guard lk(poolMu_);
  startThread();
  startThread();
}

void Migration::startThread() {
  if (ctx_.stopping()) return;
  pool_.emplace_back([this] { loop(); });
}

void Migration::wake() noexcept {
  {
    std::lock_guard lk(qMu_);  // a thread between its stop check and its wait sees the notify
  }
  qCv_.notify_all();
}

void Migration::stop() noexcept {
  wake();
  std::vector<std::thread> pool;
  {
    std::lock_guard lk(poolMu_);  // no migrator starts another once the context is stopping
    pool.swap(pool_);
  }
  for (auto& t : pool)
    if (t.joinable()) t.join();
}

void Migration::loop() {
  ctx_.threads.enter("migrator", "reccl-migrator");
  std::unique_lock lk(qMu_);
  for (;;) {
    ++idle_;
    qCv_.wait(lk, [&] { return ctx_.stopping() || !jobs_.empty() || !passive_.empty(); });
    --idle_;
    if (ctx_.stopping()) break;
    // The peer's handshakes first: the peer's migration waits on them.
    std::optional<Passive> p;
    std::optional<Job> j;
    if (!passive_.empty()) {
      p.emplace(std::move(passive_.front()));
      passive_.pop_front();
    } else {
      j = jobs_.front();
      jobs_.pop_front();
    }
    if (idle_ == 0) {
      lk.unlock();
      {
        std::lock_guard pl(poolMu_);
        startThread();
      }
      lk.lock();
    }
    lk.unlock();
    if (p) {
      handlePassive(std::move(*p));
    } else if (j->reason == MigrateReason::kStandby) {
      if (auto c = ctx_.conns.find(j->id)) {
        ctx_.standbys->make(*c);
        c->standbyMaking.store(false);
      }
    } else {
      runJob(*j);
      if (auto c = ctx_.conns.find(j->id))
        if (auto next = c->jobs.finish()) push(std::move(*next));  // the job that waited for it
    }
    lk.lock();
  }
}

void Migration::enqueue(Job j) {
  auto c = ctx_.conns.find(j.id);
  if (c && c->jobs.claim(j)) push(std::move(j));
}

void Migration::push(Job j) {
  j.queuedNs = monotonicNs();
  {
    std::lock_guard lk(qMu_);
    jobs_.push_back(j);
  }
  qCv_.notify_one();
}

void Migration::queueStandby(const ConnId& id, uint64_t nowNs) {
  Job j;
  j.id = id;
  j.reason = MigrateReason::kStandby;
  j.queuedNs = nowNs;
  std::lock_guard lk(qMu_);
  jobs_.push_back(j);
}

void Migration::notify() { qCv_.notify_one(); }

Status Migration::onMigrationHello(UniqueFd fd, const core::Hello& h) {
  if (ctx_.stopping()) return Status(Errc::kAborted, "failover stopped");
  {
    std::lock_guard lk(qMu_);
    passive_.push_back(Passive{std::move(fd), h, monotonicNs()});
  }
  qCv_.notify_one();
  return Status::Ok();
}

}  // namespace reccl::failover
