// One connection's migration jobs, one at a time: the job queued or running, and the one asked for
// meanwhile, which runs after it (never dropped: the running job may end without doing what the
// later one asks, e.g. a fail-back that the peer committed onto a rail that failed right after, or
// a handshake that failed after the peer closed the path in force under it). And the test each job
// makes before it moves anything: is there still something to do?
#pragma once

#include <atomic>
#include <mutex>
#include <optional>

#include "failover/migration/job.h"

namespace reccl::channel {
class Path;
}

namespace reccl::failover {

// Lock rule: mu_ guards the deferred job and the changes of queued_; nothing is called and no
// other lock is taken under it.
class JobSlot {
 public:
  // True: the slot was free and `j` is to be queued now. False: a job is queued or running; `j`
  // waits for it unless the one waiting already is stronger (a fault's move over a fail-back, an
  // unconditional move over one that depends on a path, Job::ifPath; else the newer is kept).
  bool claim(const Job& j);
  // The job queued or running has ended: the one that waited, to be queued now (the slot stays
  // taken, so no claim gets between them), or none and the slot is free.
  std::optional<Job> finish();
  // A job is queued or running.
  bool busy() const noexcept { return queued_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  std::atomic<bool> queued_{false};
  std::optional<Job> deferred_;  // under mu_
};

// Nothing left for `j` to do on a connection whose port runs `current` on `rail`: the failed path
// it was queued for has been replaced (the handshake in flight then committed), or someone (the
// peer, or an earlier job) has moved it already.
bool jobMoot(const Job& j, const channel::Path* current, int rail);

}  // namespace reccl::failover
