// reccl::Graveyard: destruction in order on its own thread; a close bounded by its deadline, the
// rest left to the thread; nothing buried is ever dropped.
#include "reccl/common/graveyard.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace reccl {
namespace {

// What the buried objects did, for the test to wait on.
struct Log {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> events;
  std::vector<std::thread::id> threads;
  bool gateOpen = false;

  void add(std::string e) {
    std::lock_guard lk(mu);
    events.push_back(std::move(e));
    threads.push_back(std::this_thread::get_id());
    cv.notify_all();
  }
  // Waits (bounded) until `n` events were logged.
  bool waitFor(size_t n) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(30), [&] { return events.size() >= n; });
  }
  void open() {
    std::lock_guard lk(mu);
    gateOpen = true;
    cv.notify_all();
  }
  std::vector<std::string> snapshot() {
    std::lock_guard lk(mu);
    return events;
  }
};

// Logs its destruction; a blocking one first waits until the test opens the gate (a QP whose
// destroy waits in the kernel).
struct Tomb {
  Tomb(Log* l, std::string n, bool block = false) : log(l), name(std::move(n)), blocks(block) {}
  ~Tomb() {
    if (blocks) {
      log->add(name + " blocking");
      std::unique_lock lk(log->mu);
      log->cv.wait(lk, [&] { return log->gateOpen; });
    }
    log->add(name);
  }
  Log* log;
  std::string name;
  bool blocks;
};

TEST(Graveyard, DestroysInOrderOnItsOwnThreadAndCloseWaitsForAll) {
  Log log;
  auto g = Graveyard::start("test-grave");
  for (const char* n : {"a", "b", "c"}) g->bury(std::make_unique<Tomb>(&log, n));
  EXPECT_EQ(g->close(Deadline::afterMs(30000)), 0u);
  EXPECT_EQ(log.snapshot(), (std::vector<std::string>{"a", "b", "c"}));
  for (auto id : log.threads) EXPECT_NE(id, std::this_thread::get_id());
}

TEST(Graveyard, FinishRunsOnTheThreadBeforeTheObjectGoes) {
  Log log;
  auto g = Graveyard::start("test-grave");
  g->bury(std::make_unique<Tomb>(&log, "qp"), [&](Tomb& t) { log.add("close " + t.name); });
  EXPECT_EQ(g->close(Deadline::afterMs(30000)), 0u);
  EXPECT_EQ(log.snapshot(), (std::vector<std::string>{"close qp", "qp"}));
}

TEST(Graveyard, CloseReturnsAtItsDeadlineAndTheThreadFinishesTheRest) {
  Log log;
  auto g = Graveyard::start("test-grave");
  g->bury(std::make_unique<Tomb>(&log, "stuck", true));
  g->bury(std::make_unique<Tomb>(&log, "after"), [&](Tomb&) { log.add("close after"); });
  ASSERT_TRUE(log.waitFor(1));  // the thread is inside the blocking destructor
  // Were close() to wait for the blocked one, it would never return: the gate opens after it.
  EXPECT_EQ(g->close(Deadline::afterMs(50)), 2u);
  // Buried after the close while the thread still works: behind the rest, never before it.
  g->bury(std::make_unique<Tomb>(&log, "late"));
  g.reset();  // the thread holds what it still has to do
  EXPECT_EQ(log.snapshot(), (std::vector<std::string>{"stuck blocking"}));
  log.open();
  ASSERT_TRUE(log.waitFor(5));
  EXPECT_EQ(log.snapshot(), (std::vector<std::string>{"stuck blocking", "stuck", "close after", "after", "late"}));
}

TEST(Graveyard, AfterCloseABurialHappensHereAndNow) {
  Log log;
  auto g = Graveyard::start("test-grave");
  EXPECT_EQ(g->close(Deadline::afterMs(30000)), 0u);
  g->bury(std::make_unique<Tomb>(&log, "late"));
  ASSERT_EQ(log.snapshot(), (std::vector<std::string>{"late"}));
  EXPECT_EQ(log.threads[0], std::this_thread::get_id());
}

TEST(Graveyard, DroppedWithoutCloseItDoesNotWait) {
  Log log;
  {
    auto g = Graveyard::start("test-grave");
    g->bury(std::make_unique<Tomb>(&log, "stuck", true));
    ASSERT_TRUE(log.waitFor(1));
  }  // the destructor closes with no time to wait: were it to wait, the gate below never opens
  log.open();
  ASSERT_TRUE(log.waitFor(2));
}

TEST(Graveyard, NullIsNotBuried) {
  auto g = Graveyard::start("test-grave");
  g->bury(std::unique_ptr<int>());
  EXPECT_EQ(g->close(Deadline::never()), 0u);
}

}  // namespace
}  // namespace reccl
