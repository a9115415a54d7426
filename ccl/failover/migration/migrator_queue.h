// The migrator threads' queue (migrator_pool.cpp runs the threads). Three kinds of work, served in
// this order: the peers' handshakes (a peer's migration waits on each), this rank's moves (a
// connection stalled until its move commits), and the standby upkeep's connects, which only
// prepare for the next fault and may block a whole connect timeout on a rail that died unnoticed.
// Every item queued wakes a waiting thread, and the thread that takes the last idle slot is told
// to start another, so no item waits behind one that blocks. Standbys run at most
// kStandbysAtOnce at a time: a burst of them (one per connection end at set-up, and again after a
// fault moved connections) would otherwise grow the pool to a thread per standby.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

#include "core/wire.h"
#include "failover/migration/job.h"
#include "reccl/common/unique_fd.h"

namespace reccl::failover {

// A migration hello the data listener proved; its handshake is served on a migrator thread.
struct PassiveHello {
  UniqueFd fd;
  core::Hello hello;
  uint64_t arrivedNs = 0;
};

// One item: a peer's handshake, or a job (a move, or with reason kStandby a standby to open).
struct MigratorWork {
  std::optional<PassiveHello> passive;
  std::optional<Job> job;
};

class MigratorQueue {
 public:
  void pushPassive(PassiveHello p);
  // A move, or a standby job (reason kStandby), which goes behind every move.
  void pushJob(Job j);
  static constexpr int kStandbysAtOnce = 4;
  // Blocks until there is work (the first by the order above) or `stopping()` holds (nullopt).
  // *startAnother: this thread took the last idle slot; the caller starts one more thread.
  // `stopping` is called under the queue's lock: it must take no lock.
  std::optional<MigratorWork> take(const std::function<bool()>& stopping, bool* startAnother);
  // A standby job take() handed out is over.
  void standbyDone();
  // Every waiting thread checks `stopping` again.
  void wakeAll() noexcept;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PassiveHello> passive_;
  std::deque<Job> moves_;
  std::deque<Job> standbys_;
  int idle_ = 0;             // threads in take() waiting
  int standbysRunning_ = 0;  // standby jobs handed out and not done
};

}  // namespace reccl::failover
