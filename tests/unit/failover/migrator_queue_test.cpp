// The migrator threads' queue (failover/migration/migrator_queue.h): the order of the three kinds
// of work, that no item waits behind one that blocks, however the items arrive, and that a burst
// of standbys does not grow the pool past the standbys' limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "failover/migration/migrator_queue.h"

namespace reccl::failover {
namespace {

Job job(MigrateReason reason, uint64_t tag) {
  Job j;
  j.reason = reason;
  j.faultNs = tag;
  return j;
}

TEST(MigratorQueue, PeersHandshakesThenMovesThenStandbys) {
  MigratorQueue q;
  q.pushJob(job(MigrateReason::kStandby, 1));
  q.pushJob(job(MigrateReason::kLinkDown, 2));
  q.pushPassive(PassiveHello{});
  q.pushJob(job(MigrateReason::kStandby, 3));
  q.pushJob(job(MigrateReason::kFailBack, 4));
  auto never = [] { return false; };
  bool another = false;
  auto w = q.take(never, &another);
  ASSERT_TRUE(w && w->passive && !w->job);
  std::vector<uint64_t> order;
  for (int i = 0; i < 4; ++i) {
    w = q.take(never, &another);
    ASSERT_TRUE(w && w->job && !w->passive);
    order.push_back(w->job->faultNs);
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{2, 4, 1, 3}));
}

// A pool run the way Migration runs it: a thread per take, one more started when a thread takes
// the last idle slot; standby work blocks (a connect to a rail that died unnoticed) until released.
class Pool {
 public:
  explicit Pool(MigratorQueue& q, int threads) : q_(q) {
    std::lock_guard lk(mu_);
    for (int i = 0; i < threads; ++i) startLocked();
  }
  ~Pool() {
    stop_.store(true);
    release();
    q_.wakeAll();
    std::vector<std::thread> ts;
    {
      std::lock_guard lk(mu_);
      ts.swap(threads_);
    }
    for (auto& t : ts) t.join();
  }
  void release() {
    {
      std::lock_guard lk(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  // Waits up to `ms` for `n` standbys started, `m` moves and `p` peers' handshakes run.
  bool waitFor(int n, int m, int ms, int p = 0) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, std::chrono::milliseconds(ms),
                        [&] { return standbys_ >= n && moves_ >= m && passives_ >= p; });
  }
  bool waitStandbysDone(int n, int ms) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, std::chrono::milliseconds(ms), [&] { return standbysDone_ >= n; });
  }
  int standbysStarted() {
    std::lock_guard lk(mu_);
    return standbys_;
  }
  int maxRunning() {
    std::lock_guard lk(mu_);
    return maxRunning_;
  }
  int threads() {
    std::lock_guard lk(mu_);
    return static_cast<int>(threads_.size());
  }

 private:
  void startLocked() {
    threads_.emplace_back([this] { loop(); });
  }
  void loop() {
    for (;;) {
      bool another = false;
      auto w = q_.take([this] { return stop_.load(); }, &another);
      if (!w) return;
      std::unique_lock lk(mu_);
      if (another && !stop_.load()) startLocked();
      if (w->job && w->job->reason == MigrateReason::kStandby) {
        ++standbys_;
        maxRunning_ = std::max(maxRunning_, ++running_);
        cv_.notify_all();
        cv_.wait_for(lk, std::chrono::seconds(30), [&] { return released_; });
        --running_;
        ++standbysDone_;
        cv_.notify_all();
        lk.unlock();
        q_.standbyDone();
      } else {
        ++(w->passive ? passives_ : moves_);
        cv_.notify_all();
      }
    }
  }
  MigratorQueue& q_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> threads_;
  bool released_ = false;
  int standbys_ = 0;      // started
  int standbysDone_ = 0;
  int running_ = 0;       // standbys blocked now
  int maxRunning_ = 0;
  int moves_ = 0;
  int passives_ = 0;
};

// The standby upkeep queues a burst while several threads wait: the standbys up to the limit get a
// thread each, and a move and a peer's handshake queued behind them run at once although every
// standby blocks.
TEST(MigratorQueue, AMoveBehindBlockedStandbysRunsAtOnce) {
  MigratorQueue q;
  Pool pool(q, 3);
  // The threads are waiting in take() before the burst.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (uint64_t i = 0; i < MigratorQueue::kStandbysAtOnce; ++i) q.pushJob(job(MigrateReason::kStandby, i));
  ASSERT_TRUE(pool.waitFor(MigratorQueue::kStandbysAtOnce, 0, 5000)) << "a standby of the burst waited for a thread";
  q.pushJob(job(MigrateReason::kLinkDown, 9));
  q.pushPassive(PassiveHello{});
  EXPECT_TRUE(pool.waitFor(MigratorQueue::kStandbysAtOnce, 1, 5000, 1))
      << "the move or the peer's handshake waited behind the blocked standbys";
}

// A burst of standbys beyond the limit: no more than the limit run at once and the pool stays
// small (those running and at most the two it started with waiting, however the burst met them),
// a move still runs at once, and every standby runs once the running ones end.
TEST(MigratorQueue, StandbysRunAtMostTheLimitAtOnce) {
  MigratorQueue q;
  Pool pool(q, 2);
  constexpr int kBurst = 16;
  for (uint64_t i = 0; i < kBurst; ++i) q.pushJob(job(MigrateReason::kStandby, i));
  ASSERT_TRUE(pool.waitFor(MigratorQueue::kStandbysAtOnce, 0, 5000));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // time for a fifth to start wrongly
  EXPECT_EQ(pool.standbysStarted(), MigratorQueue::kStandbysAtOnce);
  EXPECT_LE(pool.threads(), MigratorQueue::kStandbysAtOnce + 2);
  q.pushJob(job(MigrateReason::kLinkDown, 99));
  EXPECT_TRUE(pool.waitFor(MigratorQueue::kStandbysAtOnce, 1, 5000)) << "the move waited behind the standbys";
  pool.release();
  EXPECT_TRUE(pool.waitStandbysDone(kBurst, 10000));
  EXPECT_EQ(pool.maxRunning(), MigratorQueue::kStandbysAtOnce);
}

// A burst larger than the idle threads: every item runs, each taker of the last idle slot
// starting one more.
TEST(MigratorQueue, ABurstLargerThanThePoolAllRuns) {
  MigratorQueue q;
  Pool pool(q, 2);
  pool.release();  // standbys end at once
  for (uint64_t i = 0; i < 16; ++i) q.pushJob(job(MigrateReason::kStandby, i));
  for (uint64_t i = 0; i < 16; ++i) q.pushJob(job(MigrateReason::kLinkDown, 100 + i));
  for (int i = 0; i < 4; ++i) q.pushPassive(PassiveHello{});
  EXPECT_TRUE(pool.waitFor(16, 16, 10000, 4));
  EXPECT_TRUE(pool.waitStandbysDone(16, 10000));
}

TEST(MigratorQueue, StoppingEndsEveryWait) {
  MigratorQueue q;
  std::atomic<bool> stop{false};
  std::atomic<int> ended{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; ++i)
    ts.emplace_back([&] {
      bool another = false;
      if (!q.take([&] { return stop.load(); }, &another)) ended.fetch_add(1);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stop.store(true);
  q.wakeAll();
  for (auto& t : ts) t.join();
  EXPECT_EQ(ended.load(), 3);
}

}  // namespace
}  // namespace reccl::failover
