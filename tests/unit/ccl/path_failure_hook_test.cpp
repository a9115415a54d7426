// The path-failure hook's lifetime (channel/port.h, PathFailureHook): a thread that drives a path
// may report a failure at any moment, also while the hook's owner (a communicator's failover) is
// being taken down. remove() must wait for a call that is inside the hook and let none in after,
// so the owner can be destroyed as soon as remove() returns.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
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

// A failure nothing took up is a lost connection when the peer went (its close, a link error),
// counted per peer for recclCommPeerLost; not when the peer's bytes were wrong (a protocol error),
// nor a port its own communicator failed (fail()), nor one lost after the communicator broke.
TEST(CclPortLoss, OnlyAPeersGoingCountsAsALostConnection) {
  channel::PortEnv env;
  auto port = [&](int peer) {
    auto mem = channel::ConnMemory::anonymous(4, 4096);
    EXPECT_TRUE(mem.ok());
    return std::make_unique<channel::SendPort>(channel::PortId{0, peer, 0}, std::move(mem).value(), &env);
  };
  auto p1 = port(1), p2 = port(2), p3 = port(3), p4 = port(4), p5 = port(5);
  p1->pathFailed(nullptr, true, Status(Errc::kProtocol, "ack for a step never sent"));
  p2->fail(Status(Errc::kInvalidUsage, "mismatched count"));
  EXPECT_EQ(env.lostConnections.load(), 0u);
  EXPECT_EQ(env.firstLostPeer.load(), -1);
  p3->pathFailed(nullptr, true, Status(Errc::kPeerFailure, "connection closed by peer"));
  p3->pathFailed(nullptr, true, Status(Errc::kPeerFailure, "again"));  // one port, counted once
  p4->pathFailed(nullptr, true, Status(Errc::kLinkFailure, "transport retry counter exceeded"));
  EXPECT_EQ(env.lostConnections.load(), 2u);
  EXPECT_EQ(env.firstLostPeer.load(), 3);
  EXPECT_FALSE(env.peerLost(1));
  EXPECT_FALSE(env.peerLost(2));
  EXPECT_TRUE(env.peerLost(3));
  EXPECT_TRUE(env.peerLost(4));
  env.broken.store(true);
  p5->pathFailed(nullptr, true, Status(Errc::kPeerFailure, "closed in reply to our failure"));
  EXPECT_FALSE(env.peerLost(5));
  EXPECT_EQ(env.lostConnections.load(), 2u);
  EXPECT_TRUE(p1->failed() && p2->failed() && p5->failed());
}

}  // namespace
}  // namespace reccl
