// One connection's migration jobs, one at a time (failover/migration/job_slot.h): a job asked for
// while another runs is run after it, never dropped; which one waits when several are asked for;
// and the test a job makes before it moves anything (jobMoot).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "failover/migration/job_slot.h"
#include "reccl/common/deadline.h"

namespace reccl::failover {
namespace {

// Paths are compared by identity only: two distinct addresses stand for two paths.
struct TwoPaths {
  std::byte bytes[2]{};
  const channel::Path* a() const { return reinterpret_cast<const channel::Path*>(&bytes[0]); }
  const channel::Path* b() const { return reinterpret_cast<const channel::Path*>(&bytes[1]); }
};

// A job; `tag` (its faultNs) tells the jobs apart.
Job job(MigrateReason reason, int fromRail, int toRail, const channel::Path* ifPath, uint64_t tag) {
  Job j;
  j.reason = reason;
  j.fromRail = fromRail;
  j.toRail = toRail;
  j.ifPath = ifPath;
  j.faultNs = tag;
  return j;
}
Job fault(int fromRail, uint64_t tag = 0) { return job(MigrateReason::kLinkDown, fromRail, -1, nullptr, tag); }
Job failBack(int fromRail, int toRail, uint64_t tag = 0) {
  return job(MigrateReason::kFailBack, fromRail, toRail, nullptr, tag);
}
// The move the path-failure hook queues while a handshake is in flight.
Job ifPath(const channel::Path* p, int fromRail, uint64_t tag = 0) {
  return job(MigrateReason::kSocketError, fromRail, -1, p, tag);
}

TEST(FailoverJobSlot, AJobAskedForWhileAnotherRunsRunsAfterIt) {
  JobSlot s;
  EXPECT_FALSE(s.busy());
  ASSERT_TRUE(s.claim(failBack(1, 0, 1)));  // free: queued at once
  EXPECT_TRUE(s.busy());
  EXPECT_FALSE(s.claim(fault(1, 2)));  // the fail-back runs: this one waits for it
  auto next = s.finish();
  ASSERT_TRUE(next.has_value()) << "the job asked for meanwhile was dropped";
  EXPECT_EQ(next->faultNs, 2u);
  EXPECT_TRUE(s.busy()) << "the slot must stay taken while the waiting job is queued";
  EXPECT_FALSE(s.claim(fault(0, 3)));  // asked for while the second one runs
  next = s.finish();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->faultNs, 3u);
  EXPECT_FALSE(s.finish().has_value());
  EXPECT_FALSE(s.busy());
  EXPECT_TRUE(s.claim(fault(0, 4)));  // free again
}

TEST(FailoverJobSlot, WhichJobWaitsWhenSeveralAreAskedFor) {
  TwoPaths p;
  struct Case {
    std::string name;
    std::vector<Job> asked;  // in order, while a job runs
    uint64_t waits;          // tag of the job that runs next
  };
  const std::vector<Case> cases = {
      {"a fault's move over a fail-back asked for after it", {fault(0, 1), failBack(1, 0, 2)}, 1},
      {"a fault's move over a fail-back asked for before it", {failBack(1, 0, 1), fault(0, 2)}, 2},
      {"the newer of two fail-backs", {failBack(1, 0, 1), failBack(1, 2, 2)}, 2},
      {"the newer of two faults", {fault(0, 1), fault(1, 2)}, 2},
      {"an unconditional move over one that depends on a path", {fault(0, 1), ifPath(p.a(), 0, 2)}, 1},
      {"a move that depends on a path over a fail-back", {ifPath(p.a(), 0, 1), failBack(0, 1, 2)}, 1},
      {"an unconditional move after one that depends on a path", {ifPath(p.a(), 0, 1), fault(0, 2)}, 2},
      {"the newer of two that depend on a path", {ifPath(p.a(), 0, 1), ifPath(p.b(), 1, 2)}, 2},
  };
  for (const auto& c : cases) {
    JobSlot s;
    ASSERT_TRUE(s.claim(fault(0, 99)));
    for (const Job& j : c.asked) EXPECT_FALSE(s.claim(j)) << c.name;
    auto next = s.finish();
    ASSERT_TRUE(next.has_value()) << c.name;
    EXPECT_EQ(next->faultNs, c.waits) << c.name;
    EXPECT_FALSE(s.finish().has_value()) << c.name;
  }
}

TEST(FailoverJobSlot, ATaggedJobIsMootOnceThePortHasAnotherPath) {
  TwoPaths p;
  struct Case {
    std::string name;
    Job job;
    const channel::Path* current;
    int rail;
    bool moot;
  };
  const std::vector<Case> cases = {
      {"tagged, the port still runs the failed path", ifPath(p.a(), 0), p.a(), 0, false},
      {"tagged, the handshake in flight replaced it", ifPath(p.a(), 0), p.b(), 1, true},
      {"tagged, replaced by a commit on the same rail", ifPath(p.a(), 0), p.b(), 0, true},
      {"tagged, same path but moved off the rail", ifPath(p.a(), 0), p.a(), 1, true},
      {"untagged fault, still on its rail", fault(0), p.b(), 0, false},
      {"untagged fault, moved meanwhile", fault(0), p.b(), 1, true},
      {"fault from any rail", fault(-1), p.b(), 1, false},
      {"fail-back not yet home", failBack(1, 0), p.a(), 1, false},
      {"fail-back already home", failBack(1, 0), p.a(), 0, true},
      {"fail-back moved elsewhere meanwhile: still goes home", failBack(1, 0), p.b(), 2, false},
  };
  for (const auto& c : cases) EXPECT_EQ(jobMoot(c.job, c.current, c.rail), c.moot) << c.name;
}

// Several threads ask for jobs of one connection while two runners work the queue as the migrator
// threads do (claim -> queue; finish -> queue the job that waited). Never two jobs of the
// connection run at once, the slot comes free once the asking stops (no job stuck between a claim
// and the end of the running one), and a job asked for while one runs is run after it.
TEST(FailoverJobSlot, ConcurrentClaimsNeverRunTwoAtOnceAndNoneIsLost) {
  constexpr uint64_t kHold = 1, kLast = 2;
  JobSlot s;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job> queue;
  bool stop = false, release = false;  // under mu
  std::atomic<int> running{0};
  std::atomic<int> overlaps{0};
  std::atomic<bool> holding{false};
  std::atomic<uint64_t> lastRun{0};
  auto push = [&](const Job& j) {
    {
      std::lock_guard lk(mu);
      queue.push_back(j);
    }
    cv.notify_all();
  };
  std::vector<std::thread> runners;
  for (int r = 0; r < 2; ++r) {
    runners.emplace_back([&] {
      std::unique_lock lk(mu);
      for (;;) {
        cv.wait(lk, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;
        Job j = queue.front();
        queue.pop_front();
        if (running.fetch_add(1) != 0) overlaps.fetch_add(1);
        if (j.faultNs == kHold) {  // a job that runs until the test lets it end
          holding.store(true);
          cv.wait_for(lk, std::chrono::seconds(10), [&] { return release; });
        }
        lk.unlock();
        std::this_thread::yield();
        lastRun.store(j.faultNs);
        running.fetch_sub(1);
        if (auto next = s.finish()) push(*next);
        lk.lock();
      }
    });
  }
  std::vector<std::thread> askers;
  for (int t = 0; t < 4; ++t) {
    askers.emplace_back([&, t] {
      for (uint64_t i = 1; i <= 2000; ++i) {
        Job j = fault(0, static_cast<uint64_t>(t + 1) * 10000 + i);
        if (s.claim(j)) push(j);
      }
    });
  }
  for (auto& a : askers) a.join();
  Deadline d = Deadline::afterMs(10000);
  while (s.busy() && !d.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(s.busy()) << "the slot stayed taken with nothing left to run";

  // A job asked for while another runs: run after it.
  ASSERT_TRUE(s.claim(fault(0, kHold)));
  push(fault(0, kHold));
  while (!holding.load() && !d.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(holding.load());
  EXPECT_FALSE(s.claim(fault(0, kLast)));
  {
    std::lock_guard lk(mu);
    release = true;
  }
  cv.notify_all();
  while ((s.busy() || lastRun.load() != kLast) && !d.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  {
    std::lock_guard lk(mu);
    stop = true;
  }
  cv.notify_all();
  for (auto& r : runners) r.join();
  EXPECT_EQ(overlaps.load(), 0) << "two jobs of one connection ran at once";
  EXPECT_EQ(lastRun.load(), kLast) << "the job asked for while another ran never ran";
  EXPECT_FALSE(s.busy());
}

// Both ends' stall checks see one silence. When the peer's move of the connection commits while
// this end's check is between its sample of the old path and its job, the job must not move the
// new path: with the rail that the connection runs on by then, it would take the connection back
// onto the stalled rail (and fail it there).
TEST(FailoverJobSlot, AStallVerdictIsMootOnceThePeersMoveReplacedThePath) {
  TwoPaths p;
  constexpr uint64_t kMs = 1'000'000;
  const Job j = stallMove(ConnId{1, 0, 1}, 1, p.a(), 3092, 10'000 * kMs);
  EXPECT_EQ(j.reason, MigrateReason::kStall);
  EXPECT_EQ(j.faultNs, (10'000 - 3092) * kMs) << "the fault's signal is when the path fell quiet";
  EXPECT_FALSE(jobMoot(j, p.a(), 1)) << "the stalled path still runs: it must move";
  EXPECT_TRUE(jobMoot(j, p.b(), 0)) << "the peer moved the connection to rail 0 meanwhile";
  EXPECT_TRUE(jobMoot(j, p.b(), 1)) << "the peer moved the connection to a new path on the same rail";
  // The rail read before the commit, the path after it: moot too.
  EXPECT_TRUE(jobMoot(stallMove(ConnId{1, 0, 1}, 1, p.b(), 3092, 10'000 * kMs), p.b(), 0));
  EXPECT_EQ(stallMove(ConnId{1, 0, 1}, 1, p.a(), 3092, 1 * kMs).faultNs, 0u) << "no time before the clock's start";
}

// A commit that failed after it retired the old path leaves the connection on a path whose I/O
// has stopped: no engine reports it, and the stall check cannot tell it from an idle one. The
// peer whose handshake it was retries at once when it can reach this end; after the grace this
// end moves the connection itself, only while the port still runs that path, and with at least
// one attempt whatever the failover timeout left (its signal is the retirement, the grace ago).
TEST(FailoverJobSlot, AConnectionLeftOnARetiredPathIsMovedOnceThePeerHadTimeToRetry) {
  TwoPaths p;
  constexpr uint64_t kMs = 1'000'000;
  const ConnId id{1, 0, 1};
  const uint64_t at = 10'000 * kMs;
  EXPECT_FALSE(leftOnRetiredPath(id, 1, p.a(), p.a(), at, at + 1'999 * kMs, 2000)) << "within the grace";
  EXPECT_FALSE(leftOnRetiredPath(id, 1, p.b(), p.a(), at, at + 9'000 * kMs, 2000)) << "a new path replaced it";
  EXPECT_FALSE(leftOnRetiredPath(id, 1, p.a(), nullptr, 0, at, 2000)) << "nothing retired";
  EXPECT_FALSE(leftOnRetiredPath(id, 1, nullptr, nullptr, 0, at, 2000)) << "no path yet";
  auto j = leftOnRetiredPath(id, 1, p.a(), p.a(), at, at + 2'000 * kMs, 2000);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->reason, MigrateReason::kSocketError);
  EXPECT_EQ(j->fromRail, 1);
  EXPECT_EQ(j->faultNs, at);
  EXPECT_FALSE(jobMoot(*j, p.a(), 1)) << "still on the retired path: it must move";
  EXPECT_TRUE(jobMoot(*j, p.b(), 1)) << "the peer's retry committed meanwhile";
  EXPECT_EQ(failoverBudgetMs(*j, at + 2'000 * kMs, 3000, 1000), 1000) << "the timeout from the retirement";
  EXPECT_EQ(failoverBudgetMs(*j, at + 2'000 * kMs, 1500, 1000), 1000) << "one attempt, not none";
  Job plain = *j;
  plain.attemptAtLeastOnce = false;
  EXPECT_EQ(failoverBudgetMs(plain, at + 2'000 * kMs, 1500, 1000), 1) << "a fault's spent time, for comparison";
}

// RECCL_FAILOVER_TIMEOUT_MS runs from the fault's first signal, but a move of the stall check's
// verdict (a stall time after the path fell quiet) has at least one attempt when it runs.
TEST(FailoverBudget, FromTheFirstSignalAtLeastOneAttemptForAStallVerdict) {
  constexpr uint64_t kMs = 1'000'000;
  // A kernel event 1 s ago: 4 s of the 5 s left.
  EXPECT_EQ(failoverBudgetMs(fault(0, 1'000 * kMs), 2'000 * kMs, 5000, 1000), 4000);
  // Quiet since 1 ms, the verdict 2 s later (the default stall time): 3 s left, more than one attempt.
  Job stall = job(MigrateReason::kStall, 0, -1, nullptr, 1 * kMs);
  EXPECT_EQ(failoverBudgetMs(stall, 2'001 * kMs, 5000, 1000), 3000);
  // A 10 s stall time over a 5 s failover timeout: one attempt, not none, also when the job ran
  // late (deferred behind another of its connection).
  EXPECT_EQ(failoverBudgetMs(stall, 10'001 * kMs, 5000, 1000), 1000);
  EXPECT_EQ(failoverBudgetMs(stall, 12'001 * kMs, 5000, 1000), 1000);
  // Any other fault's time spent: at least 1 ms (a Deadline that has passed).
  EXPECT_EQ(failoverBudgetMs(fault(0, 1 * kMs), 9'001 * kMs, 5000, 1000), 1);
  // No signal time: the whole timeout.
  EXPECT_EQ(failoverBudgetMs(Job{}, 7'000 * kMs, 5000, 1000), 5000);
}

}  // namespace
}  // namespace reccl::failover
