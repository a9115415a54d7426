// The migrator threads. A rail fault moves every connection on it at once (both directions of
// each peer pair), and the far end takes each over: the jobs of both kinds run on pre-started
// migrator threads, so the connections' handshakes overlap instead of queueing (run one by one,
// the second commits a whole handshake after the first), and a fault's first jobs find a thread
// waiting. A thread that takes the last idle slot starts one more (MigratorQueue), so a job
// blocked in a connect never delays another; the pool never shrinks, and all are joined at stop.
#include <optional>
#include <system_error>

#include "failover/context.h"
#include "failover/migration/migration.h"
#include "failover/standby/standby.h"
#include "reccl/common/log.h"

namespace reccl::failover {

Migration::~Migration() { stop(); }

void Migration::start() {
  std::lock_guard lk(poolMu_);
  startThread();
  startThread();
}

void Migration::startThread() {
  if (ctx_.stopping()) return;
  try {
    pool_.emplace_back([this] { loop(); });
  } catch (const std::system_error& e) {
    // Out of threads (a pids limit): the running ones still serve the queue, later.
    RECCL_WARN(kLogFailover, "rank %d: no migrator thread started (%zu running): %s", ctx_.cfg.rank, pool_.size(),
               e.what());
  }
}

void Migration::wake() noexcept { queue_.wakeAll(); }

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
  for (;;) {
    bool startAnother = false;
    std::optional<MigratorWork> w = queue_.take([this] { return ctx_.stopping(); }, &startAnother);
    if (!w) break;
    if (startAnother) {
      std::lock_guard pl(poolMu_);
      startThread();
    }
    if (w->passive) {
      handlePassive(std::move(*w->passive));
      continue;
    }
    const Job& j = *w->job;
    if (j.reason == MigrateReason::kStandby) {
      if (auto c = ctx_.conns.find(j.id)) {
        ctx_.standbys->make(*c);
        c->standbyMaking.store(false);
      }
      queue_.standbyDone();
      continue;
    }
    runJob(j);
    if (auto c = ctx_.conns.find(j.id))
      if (auto next = c->jobs.finish()) push(std::move(*next));  // the job that waited for it
  }
}

void Migration::enqueue(Job j) {
  auto c = ctx_.conns.find(j.id);
  if (c && c->jobs.claim(j)) push(std::move(j));
}

void Migration::push(Job j) {
  j.queuedNs = monotonicNs();
  queue_.pushJob(std::move(j));
}

void Migration::queueStandby(const ConnId& id, uint64_t nowNs) {
  queue_.pushJob(Job{.id = id, .reason = MigrateReason::kStandby, .queuedNs = nowNs});
}

Status Migration::onMigrationHello(UniqueFd fd, const core::Hello& h) {
  if (ctx_.stopping()) return Status(Errc::kAborted, "failover stopped");
  queue_.pushPassive(PassiveHello{std::move(fd), h, monotonicNs()});
  return Status::Ok();
}

}  // namespace reccl::failover
