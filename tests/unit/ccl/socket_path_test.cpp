// The TCP paths of one directed connection over loopback, driven by a real progress engine:
// small steps leave from the posting thread, acknowledgements of small steps are batched (and the
// due ones leave from the releasing thread) yet always arrive (the sender never runs out of slots, and an idle connection acks everything),
// and a direct step is acknowledged without waiting for a batch.
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "ccl_test_util.h"
#include "channel/port.h"
#include "transport/socket_engine.h"
#include "transport/socket_paths.h"
#include "transport/socket_util.h"

namespace {

using namespace reccl;

struct Conn {
  std::unique_ptr<transport::SocketEngine> engine;  // outlives the ports (their paths use it)
  channel::PortEnv env;
  std::unique_ptr<channel::SendPort> tx;
  std::unique_ptr<channel::RecvPort> rx;
  std::string error;
};

// beforePaths runs on the two ports before their paths are made (steps posted with no path
// yet); the send path then sends the steps after sentBefore, as a migrated path resends.
std::unique_ptr<Conn> openConn(uint32_t slots, size_t chunk, const std::function<void(Conn&)>& beforePaths = {},
                               uint64_t sentBefore = UINT64_MAX) {
  auto c = std::make_unique<Conn>();
  auto fail = [&](const Status& s) {
    c->error = s.ToString();
    return std::move(c);
  };
  auto e = transport::SocketEngine::create("test-progress");
  if (!e.ok()) return fail(e.status());
  c->engine = std::move(e).value();
  transport::Endpoint ep;
  auto l = transport::listenTcp(htonl(INADDR_LOOPBACK), 0, &ep);
  if (!l.ok()) return fail(l.status());
  auto out = transport::connectTcp(ep, 0, "", Deadline::afterMs(5000));
  if (!out.ok()) return fail(out.status());
  auto in = transport::acceptTcp(l->get(), Deadline::afterMs(5000));
  if (!in.ok()) return fail(in.status());
  transport::tuneDataSocket(out->get(), "");
  transport::tuneDataSocket(in->get(), "");
  auto txMem = channel::ConnMemory::anonymous(slots, chunk);
  auto rxMem = channel::ConnMemory::anonymous(slots, chunk);
  if (!txMem.ok() || !rxMem.ok()) return fail(Status(Errc::kInternal, "connection memory"));
  c->tx = std::make_unique<channel::SendPort>(channel::PortId{0, 1, 0}, std::move(txMem).value(), &c->env);
  c->rx = std::make_unique<channel::RecvPort>(channel::PortId{1, 0, 0}, std::move(rxMem).value(), &c->env);
  if (beforePaths) beforePaths(*c);
  auto sp = std::make_unique<transport::SocketSendPath>(c->engine.get(), std::move(out).value(), c->tx.get(), "test tx",
                                                        sentBefore);
  auto rp = std::make_unique<transport::SocketRecvPath>(c->engine.get(), std::move(in).value(), c->rx.get(), "test rx");
  auto* sraw = sp.get();
  auto* rraw = rp.get();
  c->tx->setPath(std::move(sp));
  c->rx->setPath(std::move(rp));
  sraw->start();
  rraw->start();
  return c;
}

// Posts `steps` 8-byte steps one at a time, each received and released before the next.
void pingSteps(Conn& c, int steps) {
  channel::CollDesc desc{1, 1, -1, channel::CollKind::kAllReduce, 7, 0};
  for (int i = 0; i < steps; ++i) {
    auto s = c.tx->acquire(Deadline::afterMs(5000));
    ASSERT_TRUE(s.ok()) << "step " << i << ": " << s.status().ToString();
    uint64_t v = 0x5a5a000000000000ull + static_cast<uint64_t>(i);
    std::memcpy(s->data(), &v, sizeof(v));
    ASSERT_TRUE(c.tx->post(sizeof(v), desc).ok());
    auto r = c.rx->wait(Deadline::afterMs(5000), desc);
    ASSERT_TRUE(r.ok()) << "step " << i << ": " << r.status().ToString();
    ASSERT_EQ(r->size(), sizeof(v));
    uint64_t got;
    std::memcpy(&got, r->data(), sizeof(got));
    ASSERT_EQ(got, v) << "step " << i;
    ASSERT_TRUE(c.rx->release().ok());
  }
}

// Every ack reaches the sender within `ms` (the receiver batches them, then flushes when idle).
bool allAcked(const Conn& c, int ms) {
  Deadline d = Deadline::afterMs(ms);
  while (c.tx->acked() < c.tx->posted() && !d.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return c.tx->acked() == c.tx->posted();
}

// What the engine counted over one run of pingSteps, and whether the shares that depend on the
// scheduler (which thread reached the socket first) came out as designed.
struct SmallStepShares {
  uint64_t inlineSends, acksSent, inlineAcks, acksLeftToProgress;
  std::string ToString() const {
    return "inline sends " + std::to_string(inlineSends) + ", acks sent " + std::to_string(acksSent) +
           " (inline " + std::to_string(inlineAcks) + ", left to the progress thread " +
           std::to_string(acksLeftToProgress) + ")";
  }
};

TEST(CclSocketPath, SmallStepsInlineWithBatchedAcks) {
  test::ScopedEnv inl("RECCL_INLINE_SEND_MAX_BYTES", "64K");
  test::ScopedEnv lazy("RECCL_LAZY_ACK_MAX_BYTES", "64K");
  const int steps = 400;
  // Two slots: a batch is one step (the sender must never wait for an ack that is held back);
  // eight: acks every fourth step.
  for (uint32_t slots : {2u, 8u}) {
    SCOPED_TRACE("slots " + std::to_string(slots));
    // Every run must move every step intact and get every ack back. Which thread sends a step or
    // an ack is up to the scheduler: the progress thread takes one whenever it is on the path at
    // that instant, or flushes acks when it has been idle for a while (a run on a loaded machine
    // can see that often). So the shares below must hold in one of three runs on fresh
    // connections; a transport that never sends inline, or acks every step, fails all three.
    std::vector<SmallStepShares> runs;
    bool asDesigned = false;
    for (int run = 0; run < 3 && !asDesigned; ++run) {
      auto c = openConn(slots, 4096);
      ASSERT_EQ(c->error, "");
      pingSteps(*c, steps);
      if (HasFatalFailure()) return;
      ASSERT_TRUE(allAcked(*c, 2000)) << "acked " << c->tx->acked() << " of " << c->tx->posted();
      const transport::SocketEngine& e = *c->engine;
      SmallStepShares r{e.inlineSends.load(), e.acksSent.load(), e.inlineAcks.load(), e.acksLeftToProgress.load()};
      runs.push_back(r);
      // Each step was posted with nothing queued ahead of it: the poster sent it itself, unless
      // the progress thread was on the path at that instant.
      asDesigned = r.inlineSends >= static_cast<uint64_t>(steps / 2);
      // Acks are batched.
      if (slots == 8) asDesigned = asDesigned && r.acksSent < static_cast<uint64_t>(steps);
      // A due ack leaves from the releasing thread (no progress-thread wake-up) unless the
      // progress thread was sending one at that instant, or flushed it when idle.
      asDesigned = asDesigned && r.inlineAcks > 0 && r.inlineAcks * 4 >= r.acksSent;
    }
    std::string seen;
    for (const auto& r : runs) seen += "\n  " + r.ToString();
    EXPECT_TRUE(asDesigned) << "of " << steps << " steps per run:" << seen;
  }
}

TEST(CclSocketPath, EveryStepAckedWhenBatchingIsOff) {
  test::ScopedEnv inl("RECCL_INLINE_SEND_MAX_BYTES", "0");
  test::ScopedEnv lazy("RECCL_LAZY_ACK_MAX_BYTES", "0");
  auto c = openConn(8, 4096);
  ASSERT_EQ(c->error, "");
  pingSteps(*c, 100);
  if (HasFatalFailure()) return;
  EXPECT_EQ(c->engine->inlineSends.load(), 0u);
  EXPECT_EQ(c->engine->inlineAcks.load(), 0u);  // the same switch keeps acks on the progress thread
  EXPECT_TRUE(allAcked(*c, 2000));
}

// A direct step (payload in the caller's memory until acked) asks for its ack at once; the
// caller's finishDirect() waits for it. Bigger steps than the batching limit are acked at once.
TEST(CclSocketPath, DirectAndLargeStepsAreAcked) {
  test::ScopedEnv lazy("RECCL_LAZY_ACK_MAX_BYTES", "1K");
  auto c = openConn(8, 4096);
  ASSERT_EQ(c->error, "");
  channel::CollDesc desc{1, 1, -1, channel::CollKind::kAllReduce, 7, 0};
  std::vector<std::byte> user(100, std::byte{3});
  ASSERT_TRUE(c->tx->acquire(Deadline::afterMs(5000)).ok());
  ASSERT_TRUE(c->tx->postDirect(user.data(), user.size(), desc).ok());
  auto r = c->rx->wait(Deadline::afterMs(5000), desc);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[99], std::byte{3});
  ASSERT_TRUE(c->rx->release().ok());
  EXPECT_TRUE(c->tx->waitAcked(1, Deadline::afterMs(5000)).ok());
  auto s = c->tx->acquire(Deadline::afterMs(5000));
  ASSERT_TRUE(s.ok());
  std::memset(s->data(), 9, 2048);
  ASSERT_TRUE(c->tx->post(2048, desc).ok());
  auto r2 = c->rx->wait(Deadline::afterMs(5000), desc);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ((*r2)[2047], std::byte{9});
  ASSERT_TRUE(c->rx->release().ok());
  EXPECT_TRUE(c->tx->waitAcked(2, Deadline::afterMs(5000)).ok());
}

// Steps posted under epoch 1 and sent after the connection moved to epoch 2 (a migrated path
// resending from the slots) arrive with epoch 2, and the slots keep the headers as posted: a path
// sends its own copy of each header and never writes the port's slots, so an old path still
// sending while its successor starts cannot change the epoch the successor sends.
TEST(CclSocketPath, APathSendsItsEpochAndLeavesTheSlotsAsPosted) {
  channel::CollDesc desc{1, 1, -1, channel::CollKind::kAllReduce, 7, 0};
  const std::vector<size_t> sizes = {8, 2048, 0};
  auto c = openConn(4, 4096, [&](Conn& k) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto slot = k.tx->acquire(Deadline::afterMs(5000));
      ASSERT_TRUE(slot.ok()) << slot.status().ToString();
      std::memset(slot->data(), static_cast<int>(0x40 + i), sizes[i]);
      ASSERT_TRUE(k.tx->post(sizes[i], desc).ok());
    }
    k.tx->setEpoch(2);
    k.rx->setEpoch(2);
  }, 0);
  ASSERT_EQ(c->error, "");
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto r = c->rx->wait(Deadline::afterMs(5000), desc);
    ASSERT_TRUE(r.ok()) << "step " << i + 1 << ": " << r.status().ToString();
    ASSERT_EQ(r->size(), sizes[i]);
    for (size_t b = 0; b < sizes[i]; ++b) ASSERT_EQ((*r)[b], std::byte(0x40 + i)) << "step " << i + 1;
    ASSERT_TRUE(c->rx->release().ok());
  }
  EXPECT_EQ(c->env.staleSteps.load(), 0u) << "a step arrived with the epoch it was posted under";
  ASSERT_TRUE(allAcked(*c, 2000));
  for (uint64_t s = 1; s <= sizes.size(); ++s) {
    auto h = channel::decodeStepHeader(
        std::span<const std::byte>(c->tx->memory().slotFrame(s), channel::kStepHeaderBytes));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_EQ(h->epoch, 1u) << "the path wrote its epoch into the slot of step " << s;
  }
}

// A communicator that fails itself latches its error in the ports' environment before it fails
// its ports, which it reaches only through port maps it may not get (another thread holds one:
// a lazy connect, a call's port lookup, the failover's port walk). A wait on a port it never
// failed must end with that error all the same, not at the wait's own deadline: a rank whose
// failover gave up on a peer otherwise waited out RECCL_TIMEOUT_MS on another connection.
TEST(CclSocketPath, AWaitEndsWithItsCommunicatorsFailureOnAPortThatNeverFailed) {
  // One connection whose sender waits for a slot (both posted, the receiver takes neither), one
  // whose receiver waits for a step that is never posted.
  auto full = openConn(2, 4096);
  auto idle = openConn(2, 4096);
  ASSERT_EQ(full->error, "");
  ASSERT_EQ(idle->error, "");
  channel::CollDesc desc{1, 1, -1, channel::CollKind::kAllReduce, 7, 0};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(full->tx->acquire(Deadline::afterMs(5000)).ok());
    ASSERT_TRUE(full->tx->post(8, desc).ok());
  }
  const Status why(Errc::kLinkFailure, "rank 0: no path for rank 1->0 ch 0 within RECCL_FAILOVER_TIMEOUT_MS");
  std::thread breaker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    full->env.commFailure.latch(why);
    idle->env.commFailure.latch(why);
  });
  auto t0 = std::chrono::steady_clock::now();
  auto slot = full->tx->acquire(Deadline::afterMs(8000));
  auto step = idle->rx->wait(Deadline::afterMs(8000), desc);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  breaker.join();
  ASSERT_FALSE(slot.ok());
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(slot.status().message(), why.message());
  EXPECT_EQ(step.status().message(), why.message());
  EXPECT_LT(s, 5.0) << "the waits ended at their deadline, not at the communicator's failure";
  EXPECT_FALSE(full->tx->failed() || idle->rx->failed());  // nobody failed the ports themselves
  EXPECT_TRUE(full->tx->stopped() && idle->rx->stopped());  // what a loop polling the ports sees
}

}  // namespace

