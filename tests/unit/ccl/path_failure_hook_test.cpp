// The path-failure hook's lifetime (channel/port.h, PathFailureHook): a thread that drives a path
// may report a failure at any moment, also while the hook's owner (a communicator's failover) is
// being taken down. remove() must wait for a call that is inside the hook and let none in after,
// so the owner can be destroyed as soon as remove() returns.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "channel/conn_memory.h"
#include "channel/port.h"

namespace reccl {
namespace {

// The hook's owner: what a failover keeps and frees.
struct Owner {
  std::atomic<bool> alive{true};
  std::atomic<int> callsWhileDead{0};
  std::atomic<int> calls{0};
};

TEST(CclPortPathFailureHook, RemoveWaitsForTheCallInsideAndLetsNoneInAfter) {
  channel::PortEnv env;
  auto mem = channel::ConnMemory::anonymous(4, 4096);
  ASSERT_TRUE(mem.ok());
  channel::SendPort port(channel::PortId{0, 1, 0}, std::move(mem).value(), &env);

  Owner owner;
  std::mutex mu;
  std::condition_variable cv;
  bool inside = false;
  bool removeReturned = false;
  int order = 0;
  int leftAt = -1;
  int removedAt = -1;
  env.pathFailureHook.install([&](const channel::PortId&, const channel::Path*, bool, const Status&) {
    owner.calls.fetch_add(1);
    if (!owner.alive.load()) owner.callsWhileDead.fetch_add(1);
    std::unique_lock lk(mu);
    inside = true;
    cv.notify_all();
    // Stays inside until remove() has returned, or for 300 ms: remove() may return only after
    // this call has left, so with a correct hook the wait ends at the deadline.
    cv.wait_for(lk, std::chrono::milliseconds(300), [&] { return removeReturned; });
    leftAt = order++;
    return true;
  });

  // A progress thread reports a failure and is held inside the hook.
  std::thread progress([&] { port.pathFailed(nullptr, true, Status(Errc::kLinkFailure, "link down")); });
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(10), [&] { return inside; }));
  }
  // The owner goes: remove the hook, then "free" what it uses.
  std::thread remover([&] {
    env.pathFailureHook.remove();
    owner.alive.store(false);
    std::lock_guard lk(mu);
    removeReturned = true;
    removedAt = order++;
    cv.notify_all();
  });
  remover.join();
  progress.join();
  EXPECT_LT(leftAt, removedAt) << "remove() returned while a call was still inside the hook";

  // After removal no failure reaches the hook: the port latches it itself.
  port.pathFailed(nullptr, true, Status(Errc::kLinkFailure, "again"));
  EXPECT_EQ(owner.calls.load(), 1);
  EXPECT_EQ(owner.callsWhileDead.load(), 0);
  EXPECT_TRUE(port.failed());
}

// Many reporting threads against an install/remove cycle: every call that reached the hook did so
// while its owner was alive.
TEST(CclPortPathFailureHook, NoCallReachesAnOwnerAfterItsRemoval) {
  channel::PortEnv env;
  auto mem = channel::ConnMemory::anonymous(4, 4096);
  ASSERT_TRUE(mem.ok());
  channel::RecvPort port(channel::PortId{0, 1, 0}, std::move(mem).value(), &env);
  std::atomic<bool> stop{false};
  std::atomic<int> lateCalls{0};
  std::atomic<int> calls{0};
  std::vector<std::thread> reporters;
  for (int t = 0; t < 4; ++t)
    reporters.emplace_back([&] {
      while (!stop.load()) {
        port.pathFailed(nullptr, false, Status(Errc::kLinkFailure, "flap"));
        std::this_thread::yield();
      }
    });
  for (int round = 0; round < 100; ++round) {
    auto owner = std::make_unique<Owner>();
    Owner* raw = owner.get();
    env.pathFailureHook.install(
        [raw, &lateCalls, &calls](const channel::PortId&, const channel::Path*, bool, const Status&) {
          calls.fetch_add(1);
          if (!raw->alive.load()) lateCalls.fetch_add(1);
          return true;  // handled: the port never latches
        });
    // Removal races a reporter that is in the hook or about to enter it: wait (bounded) until a
    // report reached this owner, so every round removes a hook that is in use.
    int before = calls.load();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (calls.load() == before && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    env.pathFailureHook.remove();
    raw->alive.store(false);
    owner.reset();
  }
  stop.store(true);
  for (auto& t : reporters) t.join();
  EXPECT_GE(calls.load(), 100);  // every round's hook was called
  EXPECT_EQ(lateCalls.load(), 0);
}

}  // namespace
}  // namespace reccl
