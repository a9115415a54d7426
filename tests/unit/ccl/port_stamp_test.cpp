// The stamps a migrated connection leaves for benchmarks (PortEnv): where a failover's stall
// ends. A TCP-style sender owns its counters and learns acks through onAck, as SocketSendPath
// delivers them; no path is needed to drive the port itself.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "channel/port.h"

namespace reccl {
namespace {

using namespace std::chrono_literals;

struct Sender {
  channel::PortEnv env;
  std::unique_ptr<channel::SendPort> tx;
  Sender() {
    auto mem = channel::ConnMemory::anonymous(4, 4096);
    EXPECT_TRUE(mem.ok()) << mem.status().ToString();
    tx = std::make_unique<channel::SendPort>(channel::PortId{0, 1, 0}, std::move(mem).value(), &env);
  }
  void post() {
    channel::CollDesc desc{1, 1, -1, channel::CollKind::kAllReduce, 7, 0};
    auto s = tx->acquire(Deadline::afterMs(1000));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE(tx->post(16, desc).ok());
  }
};

// Nothing outstanding when the new path starts: the held-up work (none) has resumed then; the
// first step waits for the application's next step and must not move the resume stamp.
TEST(CclPortStamp, IdleSenderResumesWhenItsNewPathStarts) {
  Sender s;
  s.post();
  s.tx->onAck(1);
  ASSERT_EQ(s.tx->acked(), 1u);
  s.tx->armFirstStepStamp(true);
  const uint64_t resumed = s.env.lastMigrationResumeNs.load();
  EXPECT_NE(resumed, 0u) << "an idle sender stamps at the start of its new path";
  EXPECT_EQ(s.env.lastMigrationFirstStepNs.load(), 0u) << "no step has moved yet";
  std::this_thread::sleep_for(20ms);
  s.post();
  s.tx->onAck(2);
  const uint64_t firstStep = s.env.lastMigrationFirstStepNs.load();
  EXPECT_GE(firstStep, resumed + 20'000'000u) << "the first step came with the next post";
  EXPECT_EQ(s.env.lastMigrationResumeNs.load(), resumed) << "the later step is not part of the stall";
}

// A step outstanding when the new path starts: the stall lasts until its ack over that path, also
// when another connection of the communicator (idle) has stamped its start meanwhile.
TEST(CclPortStamp, SenderWithOutstandingStepsResumesAtItsFirstAck) {
  Sender s;
  s.post();
  s.post();
  s.tx->onAck(1);
  s.tx->armFirstStepStamp(true);
  EXPECT_EQ(s.env.lastMigrationResumeNs.load(), 0u) << "step 2 still waits for the new path";
  auto mem = channel::ConnMemory::anonymous(4, 4096);
  ASSERT_TRUE(mem.ok());
  channel::SendPort idle(channel::PortId{0, 1, 1}, std::move(mem).value(), &s.env);
  idle.armFirstStepStamp(true);
  const uint64_t idleStart = s.env.lastMigrationResumeNs.load();
  EXPECT_NE(idleStart, 0u);
  std::this_thread::sleep_for(20ms);
  s.tx->onAck(2);
  const uint64_t resumed = s.env.lastMigrationResumeNs.load();
  EXPECT_GE(resumed, idleStart + 20'000'000u) << "the waiting connection ends the stall";
  EXPECT_EQ(resumed, s.env.lastMigrationFirstStepNs.load()) << "both stamps at that first ack";
}

// A failover, then a fail-back before anyone read the stats: the fail-back restamps the stamps of
// the latest migration, the fault-move stamps keep the failover's.
TEST(CclPortStamp, AFailBackLeavesTheFailoversFaultMoveStamps) {
  Sender s;
  s.post();
  s.post();
  s.tx->onAck(1);
  s.tx->armFirstStepStamp(true);  // the failover: step 2 outstanding
  std::this_thread::sleep_for(5ms);
  s.tx->onAck(2);
  const uint64_t failoverResume = s.env.lastFaultMoveResumeNs.load();
  const uint64_t failoverFirst = s.env.lastFaultMoveFirstStepNs.load();
  ASSERT_NE(failoverResume, 0u);
  EXPECT_EQ(failoverResume, s.env.lastMigrationResumeNs.load());
  EXPECT_EQ(failoverFirst, failoverResume) << "both at the first ack over the new path";
  std::this_thread::sleep_for(20ms);
  s.post();
  s.tx->armFirstStepStamp(false);  // the fail-back: step 3 outstanding
  s.tx->onAck(3);
  EXPECT_GE(s.env.lastMigrationResumeNs.load(), failoverResume + 20'000'000u) << "the fail-back's own stamp";
  EXPECT_GE(s.env.lastMigrationFirstStepNs.load(), failoverFirst + 20'000'000u);
  EXPECT_EQ(s.env.lastFaultMoveResumeNs.load(), failoverResume) << "a fail-back is no move away from a fault";
  EXPECT_EQ(s.env.lastFaultMoveFirstStepNs.load(), failoverFirst);
  // And an idle fail-back, which stamps its resume at the start.
  s.tx->armFirstStepStamp(false);
  EXPECT_EQ(s.env.lastFaultMoveResumeNs.load(), failoverResume);
}

// An idle sender moved away from a fault resumes at its new path's start, in both stamps.
TEST(CclPortStamp, AnIdleFailoverStampsTheFaultMoveResumeAtTheStart) {
  Sender s;
  s.tx->armFirstStepStamp(true);
  EXPECT_NE(s.env.lastFaultMoveResumeNs.load(), 0u);
  EXPECT_EQ(s.env.lastFaultMoveResumeNs.load(), s.env.lastMigrationResumeNs.load());
}

// A receiver stamps the first step it receives over its new path; a fail-back's does not reach
// the fault-move stamp.
TEST(CclPortStamp, AReceiverStampsItsFirstStepAndAFailBackLeavesTheFaultMoveStamp) {
  channel::PortEnv env;
  auto mem = channel::ConnMemory::anonymous(4, 4096);
  ASSERT_TRUE(mem.ok());
  channel::RecvPort rx(channel::PortId{1, 0, 0}, std::move(mem).value(), &env);
  rx.armFirstStepStamp(true);
  EXPECT_EQ(env.lastFaultMoveFirstStepNs.load(), 0u) << "nothing received yet";
  rx.onReceived(1);
  const uint64_t failover = env.lastFaultMoveFirstStepNs.load();
  EXPECT_NE(failover, 0u);
  EXPECT_EQ(failover, env.lastMigrationFirstStepNs.load());
  EXPECT_EQ(env.lastMigrationResumeNs.load(), 0u) << "only senders end the stall";
  rx.onReceived(2);
  EXPECT_EQ(env.lastFaultMoveFirstStepNs.load(), failover) << "only the first step after the arm stamps";
  std::this_thread::sleep_for(5ms);
  rx.armFirstStepStamp(false);
  rx.onReceived(3);
  EXPECT_GT(env.lastMigrationFirstStepNs.load(), failover);
  EXPECT_EQ(env.lastFaultMoveFirstStepNs.load(), failover);
}

}  // namespace
}  // namespace reccl
