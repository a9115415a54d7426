// Moving a connection to a new socket, below the failover: SocketEngine::replace, the hand-over a
// migrated receiver uses (the caller never waits for the progress thread: it returns while that
// thread is held inside a pump; the old path is quiesced and taken off the thread at once; the
// new path is first pumped only after the old one's in-flight I/O has finished, so the two never
// write into the same slot together), and a migrated sender's resend, which never starts below
// the receiver's acknowledged step whatever the handshake said.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <array>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ccl_test_util.h"
#include "channel/port.h"
#include "reccl/common/deadline.h"
#include "transport/socket_engine.h"
#include "transport/socket_paths.h"
#include "transport/socket_util.h"

namespace {

using namespace reccl;
using namespace std::chrono_literals;

// An engine path with no socket: counts the engine's calls; `hold` keeps the progress thread
// inside pump(); `ops` stands for I/O still in flight.
class FakePath final : public transport::EnginePath {
 public:
  std::atomic<int> pumps{0};
  std::atomic<int> ops{0};
  std::atomic<bool> hold{false};
  std::atomic<bool> held{false};
  std::atomic<bool> quiesced{false};
  void pump(transport::SocketEngine&) override {
    pumps.fetch_add(1);
    while (hold.load()) {
      held.store(true);
      std::this_thread::sleep_for(1ms);
    }
  }
  void complete(transport::SocketEngine&, transport::IoOp&, int) override {}
  void quiesce() noexcept override { quiesced.store(true); }
  int inflight() const noexcept override { return ops.load(); }
  int fd() const noexcept override { return -1; }
  std::string describe() const override { return "fake path"; }
};

// Waits (with a deadline) until cond holds, kicking the engine so that it keeps turning.
template <typename Cond>
bool waitFor(transport::SocketEngine& e, Cond cond) {
  Deadline d = Deadline::afterMs(10000);
  while (!cond()) {
    if (d.expired()) return false;
    e.kick();
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(CclSocketEngine, ReplaceDoesNotWaitAndStartsTheSuccessorOnlyAfterThePredecessorDrained) {
  auto created = transport::SocketEngine::create("test-replace");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto engine = std::move(created).value();
  FakePath old, next, ticker;
  engine->add(&ticker);
  engine->add(&old);
  ASSERT_TRUE(waitFor(*engine, [&] { return old.pumps.load() > 0 && ticker.pumps.load() > 0; }));

  // The progress thread is held inside a pump and an operation of the old path is in flight.
  old.ops.store(1);
  old.hold.store(true);
  ASSERT_TRUE(waitFor(*engine, [&] { return old.held.load(); }));

  // replace() returns while the thread is held (remove() would wait for it until its deadline).
  std::atomic<bool> returned{false};
  std::thread caller([&] {
    engine->replace(&old, &next);
    returned.store(true);
  });
  Deadline d = Deadline::afterMs(10000);
  while (!returned.load() && !d.expired()) std::this_thread::sleep_for(1ms);
  bool returnedWhileHeld = returned.load();
  old.hold.store(false);  // let the thread go in any case, so that the test ends
  caller.join();
  ASSERT_TRUE(returnedWhileHeld) << "replace() waited for the progress thread";
  EXPECT_TRUE(old.quiesced.load());

  // The thread turns (the ticker is pumped again and again), the old path is no longer pumped,
  // and the new one is not started while the old one's operation is in flight.
  int oldPumps = old.pumps.load();
  int ticks = ticker.pumps.load();
  ASSERT_TRUE(waitFor(*engine, [&] { return ticker.pumps.load() >= ticks + 5; }));
  EXPECT_EQ(next.pumps.load(), 0) << "the new path started before the old one drained";
  EXPECT_EQ(old.pumps.load(), oldPumps);

  // Drained: the new path starts.
  old.ops.store(0);
  ASSERT_TRUE(waitFor(*engine, [&] { return next.pumps.load() > 0; }));
  EXPECT_EQ(old.pumps.load(), oldPumps);

  engine->remove(&next);
  engine->remove(&ticker);
  engine->remove(&old);
  engine->stop();
}

// A successor removed before its predecessor drained is never started (its owner may free it
// right after remove() returns).
TEST(CclSocketEngine, SuccessorRemovedBeforeItStartsIsNeverPumped) {
  auto created = transport::SocketEngine::create("test-replace");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto engine = std::move(created).value();
  FakePath ticker;
  auto old = std::make_unique<FakePath>();
  auto next = std::make_unique<FakePath>();
  engine->add(&ticker);
  engine->add(old.get());
  ASSERT_TRUE(waitFor(*engine, [&] { return old->pumps.load() > 0; }));
  old->ops.store(1);
  engine->replace(old.get(), next.get());
  engine->remove(next.get());
  old->ops.store(0);
  int ticks = ticker.pumps.load();
  ASSERT_TRUE(waitFor(*engine, [&] { return ticker.pumps.load() >= ticks + 5; }));
  EXPECT_EQ(next->pumps.load(), 0) << "a removed successor was started";
  engine->remove(old.get());
  engine->remove(&ticker);
  engine->stop();
}

// A connected loopback socket pair with the data-socket options.
struct SocketPair {
  UniqueFd out, in;
  std::string error;
};
SocketPair socketPair() {
  SocketPair p;
  transport::Endpoint ep;
  auto l = transport::listenTcp(htonl(INADDR_LOOPBACK), 0, &ep);
  if (!l.ok()) return p.error = l.status().ToString(), std::move(p);
  auto out = transport::connectTcp(ep, 0, "", Deadline::afterMs(5000));
  if (!out.ok()) return p.error = out.status().ToString(), std::move(p);
  auto in = transport::acceptTcp(l->get(), Deadline::afterMs(5000));
  if (!in.ok()) return p.error = in.status().ToString(), std::move(p);
  transport::tuneDataSocket(out->get(), "");
  transport::tuneDataSocket(in->get(), "");
  p.out = std::move(out).value();
  p.in = std::move(in).value();
  return p;
}

// One directed connection as a migration finds it: two ports over a loopback socket pair, their
// paths started on one engine. The engine stops first, as a communicator's does: a port's path
// goes with the port's base, and a progress thread still pumping it would read the port half
// destroyed (UBSan: member call on an object that is no longer a RecvPort).
struct Connection {
  ~Connection() {
    if (engine) engine->stop();
  }
  std::mutex failMu;
  std::string otherFailure;  // a path failure other than the retired paths' (moveBothEnds)
  std::unique_ptr<transport::SocketEngine> engine;
  channel::PortEnv env;
  std::unique_ptr<channel::SendPort> tx;
  std::unique_ptr<channel::RecvPort> rx;
  transport::SocketSendPath* oldTx = nullptr;
  transport::SocketRecvPath* oldRx = nullptr;
};

// Fatal failures end the calling test (check HasFatalFailure()).
void connect(Connection& c, const char* engineName) {
  auto created = transport::SocketEngine::create(engineName);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  c.engine = std::move(created).value();
  auto txMem = channel::ConnMemory::anonymous(8, 4096);
  auto rxMem = channel::ConnMemory::anonymous(8, 4096);
  ASSERT_TRUE(txMem.ok() && rxMem.ok());
  c.tx = std::make_unique<channel::SendPort>(channel::PortId{0, 1, 0}, std::move(txMem).value(), &c.env);
  c.rx = std::make_unique<channel::RecvPort>(channel::PortId{1, 0, 0}, std::move(rxMem).value(), &c.env);
  auto a = socketPair();
  ASSERT_EQ(a.error, "");
  auto sp = std::make_unique<transport::SocketSendPath>(c.engine.get(), std::move(a.out), c.tx.get(), "old tx");
  auto rp = std::make_unique<transport::SocketRecvPath>(c.engine.get(), std::move(a.in), c.rx.get(), "old rx");
  c.oldTx = sp.get();
  c.oldRx = rp.get();
  c.tx->setPath(std::move(sp));
  c.rx->setPath(std::move(rp));
  c.oldTx->start();
  c.oldRx->start();
}

// Sends step `step` (4 KiB of a pattern of the step number), receives it, checks it bit for bit.
void roundTrip(channel::SendPort& tx, channel::RecvPort& rx, uint64_t step) {
  channel::CollDesc desc{1, 1, -1, channel::CollKind::kAllReduce, 7, 0};
  auto s = tx.acquire(Deadline::afterMs(5000));
  ASSERT_TRUE(s.ok()) << "step " << step << ": " << s.status().ToString();
  std::memset(s->data(), static_cast<int>(step & 0xff), 4096);
  ASSERT_TRUE(tx.post(4096, desc).ok());
  auto r = rx.wait(Deadline::afterMs(5000), desc);
  ASSERT_TRUE(r.ok()) << "step " << step << ": " << r.status().ToString();
  ASSERT_EQ(r->size(), 4096u);
  for (size_t i = 0; i < r->size(); ++i) ASSERT_EQ((*r)[i], std::byte(step & 0xff)) << "step " << step << " byte " << i;
  ASSERT_TRUE(rx.release().ok());
}

// Moves both ends to a new socket with epoch 2 as a failover does: the receiver first (the
// sender's close would read as a dead peer to a live old receiver), then the sender, which
// resends the steps after `resendAfter`. Closing the old socket fails the old paths; the hook
// takes those (expected while it migrates) and keeps any other failure in c.otherFailure.
// With `priority`, both new sockets start at that SO_PRIORITY and go back to 0 with their first
// acknowledged step, as a failover link's do (SocketLink).
void moveBothEnds(Connection& c, uint64_t resendAfter, int priority = 0) {
  c.env.pathFailureHook.install([&c](const channel::PortId&, const channel::Path*, bool, const Status& st) {
    if (st.message().rfind("old ", 0) == 0) return true;
    std::lock_guard lk(c.failMu);
    c.otherFailure = st.ToString();
    return false;
  });
  auto b = socketPair();
  ASSERT_EQ(b.error, "");
  if (priority > 0) {
    ASSERT_TRUE(transport::setSocketPriority(b.in.get(), priority));
    ASSERT_TRUE(transport::setSocketPriority(b.out.get(), priority));
  }
  c.rx->setEpoch(2);
  auto nrx = std::make_unique<transport::SocketRecvPath>(c.engine.get(), std::move(b.in), c.rx.get(), "new rx", 0);
  auto* newRx = nrx.get();
  if (priority > 0) newRx->normalPriorityAfterFirstNewStep();
  c.rx->setPath(std::move(nrx));
  c.engine->replace(c.oldRx, newRx);
  c.tx->setEpoch(2);
  c.oldTx->shutdown();
  auto ntx = std::make_unique<transport::SocketSendPath>(c.engine.get(), std::move(b.out), c.tx.get(), "new tx",
                                                         resendAfter);
  auto* newTx = ntx.get();
  if (priority > 0) newTx->normalPriorityAfterFirstNewStep();
  c.tx->setPath(std::move(ntx));
  newTx->start();
  c.engine->remove(c.oldTx);
}

// Neither port failed, and no path failure but the retired paths' reached the hook.
void expectNeitherEndFailed(Connection& c) {
  EXPECT_FALSE(c.tx->failed());
  EXPECT_FALSE(c.rx->failed());
  std::lock_guard lk(c.failMu);
  EXPECT_EQ(c.otherFailure, "");
}

// The sender's counters moved past what the handshake reported (steps and acks kept flowing on
// a healthy old path): the new path resends nothing the receiver acknowledged, since those slots
// now hold later steps. Resending from the reported step would send slots that now hold later
// steps: the receiver would see later steps again (dropped as duplicates here; half-written ones
// could be taken).
TEST(CclSocketMigration, SenderNeverResendsBelowTheAcknowledgedStep) {
  Connection c;
  connect(c, "test-resend");
  if (HasFatalFailure()) return;
  const uint64_t steps = 20;  // every slot reused twice
  for (uint64_t s = 1; s <= steps; ++s) {
    roundTrip(*c.tx, *c.rx, s);
    if (HasFatalFailure()) return;
  }
  Deadline d = Deadline::afterMs(10000);
  while (c.tx->acked() < steps && !d.expired()) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(c.tx->acked(), steps);

  // Migrate both ends to a new socket with epoch 2, the sender told (stale) that the receiver
  // has only step 3.
  moveBothEnds(c, 3);
  if (HasFatalFailure()) return;
  for (uint64_t s = steps + 1; s <= steps + 10; ++s) {
    roundTrip(*c.tx, *c.rx, s);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(c.env.duplicateSteps.load(), 0u) << "acknowledged steps were sent again";
  EXPECT_EQ(c.env.staleSteps.load(), 0u);
  expectNeitherEndFailed(c);
}

// Connects; steps 1-3 round trip and are acknowledged; step 4 lands on the old path and the
// receiver holds it (received, not applied), as a move finds a step the old path was completing.
void connectWithAFourthStepHeld(Connection& c, const char* engineName) {
  connect(c, engineName);
  if (::testing::Test::HasFatalFailure()) return;
  for (uint64_t s = 1; s <= 3; ++s) {
    roundTrip(*c.tx, *c.rx, s);
    if (::testing::Test::HasFatalFailure()) return;
  }
  ASSERT_TRUE(waitFor(*c.engine, [&] { return c.tx->acked() == 3; }));
  channel::CollDesc desc{1, 1, -1, channel::CollKind::kAllReduce, 7, 0};
  auto slot = c.tx->acquire(Deadline::afterMs(5000));
  ASSERT_TRUE(slot.ok()) << slot.status().ToString();
  std::memset(slot->data(), 4, 4096);
  ASSERT_TRUE(c.tx->post(4096, desc).ok());
  auto r = c.rx->wait(Deadline::afterMs(5000), desc);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

int socketPriority(const channel::Path* p) {
  int fd = -1;
  if (auto* sp = dynamic_cast<const transport::SocketSendPath*>(p)) fd = sp->fd();
  if (auto* rp = dynamic_cast<const transport::SocketRecvPath*>(p)) fd = rp->fd();
  int prio = -1;
  socklen_t len = sizeof(prio);
  if (fd < 0 || ::getsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio, &len) != 0) return -1;
  return prio;
}

// A failover link's socket is at a raised priority for its handshake and the resend (they pass
// the bulk traffic queued at a busy NIC); the path goes back to normal priority once a step
// posted after the move is acknowledged: the sender when the ack arrives, the receiver once the
// ack has left. Acks of what the old path carried change nothing: the receiver's first ack (of
// step 3, applied before the move) and the ack of step 4, which the old path landed and the
// receiver applies after the move. Left raised, every later step of the channel would jump the
// NIC's queue ahead of the others.
TEST(CclSocketMigration, AMigratedPathLeavesItsRaisedPriorityWithTheFirstAcknowledgedNewStep) {
  // Every 4 KiB step acked at once: a lazy ack leaves when the engine idles, which waitFor's
  // kicks put off.
  test::ScopedEnv lazy("RECCL_LAZY_ACK_MAX_BYTES", "1K");
  Connection c;
  connectWithAFourthStepHeld(c, "test-priority");
  if (HasFatalFailure()) return;

  moveBothEnds(c, c.rx->received(), 6);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(c.rx->release().ok());
  ASSERT_TRUE(waitFor(*c.engine, [&] { return c.tx->acked() == 4 && c.rx->path()->flush(); }));
  EXPECT_EQ(socketPriority(c.tx->path()), 6) << "the ack of a step the old path carried lowered the sender";
  EXPECT_EQ(socketPriority(c.rx->path()), 6) << "the ack of a step the old path landed lowered the receiver";

  roundTrip(*c.tx, *c.rx, 5);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(waitFor(*c.engine, [&] { return c.tx->acked() == 5; }));
  EXPECT_EQ(socketPriority(c.tx->path()), 0) << "the sender kept its raised priority past the first new ack";
  // The receiver's engine may finish the ack's send after the sender has read it.
  EXPECT_TRUE(waitFor(*c.engine, [&] { return socketPriority(c.rx->path()) == 0; }))
      << "the receiver kept its raised priority past its first new ack";
  for (uint64_t s = 6; s <= 12; ++s) {
    roundTrip(*c.tx, *c.rx, s);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(c.env.duplicateSteps.load(), 0u);
  expectNeitherEndFailed(c);
}

// A step the old path received and the receiver applies after the new path started: the new
// path never saw its header, which said the sender waits for its ack (here: a large step; a
// direct one says so in its flags). Its ack must leave when the step is applied (from the
// releasing thread), not when the engine next idles for a millisecond: on a rank whose engine
// another channel's traffic keeps busy, that can be a whole call away, and the sender waits.
TEST(CclSocketMigration, AStepTheOldPathReceivedIsAckedAtOnceWhenAppliedAfterTheMove) {
  test::ScopedEnv lazy("RECCL_LAZY_ACK_MAX_BYTES", "1K");  // every 4 KiB step: ack at once
  test::ScopedEnv inl("RECCL_INLINE_SEND_MAX_BYTES", "64K");
  Connection c;
  connectWithAFourthStepHeld(c, "test-ack-after-move");
  if (HasFatalFailure()) return;

  moveBothEnds(c, c.rx->received());
  if (HasFatalFailure()) return;
  // The new receive path has started and its first ack (the applied step 3) is on the socket.
  ASSERT_TRUE(waitFor(*c.engine, [&] { return c.rx->path()->flush(); }));

  // Applying the step makes its ack due at once: the releasing thread sends it, or, when the
  // progress thread has the acks at that moment (a busy machine), leaves it to that thread's
  // next round, or finds it already sent by a round of that thread that saw the step applied
  // first. None of these: the ack waits for the engine to idle.
  const uint64_t inlineBefore = c.engine->inlineAcks.load();
  const uint64_t leftBefore = c.engine->acksLeftToProgress.load();
  const uint64_t sentBefore = c.engine->acksSent.load();
  ASSERT_TRUE(c.rx->release().ok());
  const uint64_t inlineSent = c.engine->inlineAcks.load() - inlineBefore;
  const uint64_t left = c.engine->acksLeftToProgress.load() - leftBefore;
  const uint64_t sentByProgress = c.engine->acksSent.load() - sentBefore - inlineSent;
  EXPECT_GE(inlineSent + left + sentByProgress, 1u) << "applying the step sent no ack: it waits for the engine to idle";
  EXPECT_LE(inlineSent, 1u) << "one applied step, one ack";
  Deadline d = Deadline::afterMs(5000);
  while (c.tx->acked() < 4 && !d.expired()) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(c.tx->acked(), 4u);
  expectNeitherEndFailed(c);
}

// The receiver acknowledges steps this path has not finished sending: after a migration the
// path resends from the step the handshake reported, and the receiver may already have more of
// them (the old path was completing them; on a fail-back the old path still flows). Those acks
// must wait until the path has handed the steps to the socket: an ack frees the step's slot for
// reuse and tells the algorithm that a direct step's payload, the caller's memory the resend is
// still reading, may go. An ack let through at once would let the caller unmap the buffer under
// the resend (sendmsg EFAULT, a spurious failover), and a reused slot be sent as the step it
// replaced.
TEST(CclSocketMigration, AnAckAheadOfTheSendIsHeldUntilTheStepIsSent) {
  auto created = transport::SocketEngine::create("test-ack-ahead");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto engine = std::move(created).value();
  channel::PortEnv env;
  std::string failure;
  env.pathFailureHook.install([&](const channel::PortId&, const channel::Path*, bool, const Status& st) {
    failure = st.ToString();
    return false;
  });
  // 8 direct steps of 8 MiB: 64 MiB, more than the socket's buffers on both ends hold.
  constexpr uint32_t kSteps = 8;
  constexpr size_t kChunk = 8 << 20;
  auto mem = channel::ConnMemory::anonymous(kSteps, kChunk);
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  channel::SendPort tx(channel::PortId{0, 1, 0}, std::move(mem).value(), &env);
  auto a = socketPair();
  ASSERT_EQ(a.error, "");
  UniqueFd peer = std::move(a.in);
  auto sp = std::make_unique<transport::SocketSendPath>(engine.get(), std::move(a.out), &tx, "tx", 0);
  auto* path = sp.get();
  tx.setPath(std::move(sp));
  path->start();
  ASSERT_TRUE(tx.sendsDirect());

  std::vector<std::byte> payload(kSteps * kChunk);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = std::byte(static_cast<uint8_t>(i * 2654435761u >> 13));
  channel::CollDesc desc{1, kSteps * kChunk, -1, channel::CollKind::kAllReduce, 7, 0};
  for (uint32_t s = 0; s < kSteps; ++s) {
    ASSERT_TRUE(tx.acquire(Deadline::afterMs(5000)).ok());
    ASSERT_TRUE(tx.postDirect(payload.data() + s * kChunk, kChunk, desc).ok());
  }

  // The receiver says it has every step before reading a byte.
  std::array<std::byte, channel::kAckFrameBytes> ack{};
  channel::encodeAck(channel::AckFrame{tx.epoch(), kSteps},
                     std::span<std::byte, channel::kAckFrameBytes>(ack.data(), ack.size()));
  ASSERT_TRUE(transport::sendAll(peer.get(), ack, Deadline::afterMs(5000)).ok());
  // The progress thread reads the ack at once; the socket holds far less than the 64 MiB.
  std::this_thread::sleep_for(300ms);
  EXPECT_LT(tx.acked(), kSteps) << "the ack reached the port while the path was still sending the steps";

  // Read everything: the frames are exact, and the held ack reaches the port once all is sent.
  std::vector<std::byte> got(channel::kStepHeaderBytes + kChunk);
  for (uint32_t s = 1; s <= kSteps; ++s) {
    ASSERT_TRUE(transport::recvAll(peer.get(), got, Deadline::afterMs(10000)).ok()) << "step " << s;
    auto h = channel::decodeStepHeader(std::span<const std::byte>(got.data(), channel::kStepHeaderBytes));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_EQ(h->step, s);
    EXPECT_EQ(h->bytes, kChunk);
    ASSERT_EQ(std::memcmp(got.data() + channel::kStepHeaderBytes, payload.data() + (s - 1) * kChunk, kChunk), 0)
        << "step " << s << " differs";
  }
  EXPECT_TRUE(waitFor(*engine, [&] { return tx.acked() == kSteps; })) << "the held ack never reached the port";
  EXPECT_TRUE(tx.waitAcked(kSteps, Deadline::afterMs(1000)).ok());
  EXPECT_EQ(failure, "");
  engine->stop();
}

}  // namespace

namespace {

// The peer retires the old path of a migration this end initiated (it commits on the request and
// closes the old socket) while this end commits on the reply. The old receive path's EOF reaches
// the failover hook, and this end's commit lands while the hook decides: a migrated receiver
// hands its new path to the engine without waiting for the progress thread (SocketEngine::replace),
// so the commit ends and the hook finds no migration in progress (Monitor::onPathFailure reads
// `busy` after the commit cleared it) and answers false, as it does for a dead peer. The close
// of a path the port no longer uses must not fail the connection. Latched, it would fail both
// ranks' communicators with "connection closed by peer while receiving".
TEST(CclSocketMigration, PeerCloseOfAPathReplacedWhileTheHookDecidesIsNotAFailure) {
  Connection c;
  connect(c, "test-retired-eof");
  if (HasFatalFailure()) return;
  for (uint64_t s = 1; s <= 4; ++s) {
    roundTrip(*c.tx, *c.rx, s);
    if (HasFatalFailure()) return;
  }

  // The hook holds the progress thread on the old receive path's failure until this end has
  // committed, then gives the verdict the failover gives once no migration is in progress.
  std::mutex mu;
  std::condition_variable cv;
  bool inHook = false, committed = false;
  std::string otherFailure;
  c.env.pathFailureHook.install([&](const channel::PortId&, const channel::Path*, bool isSender, const Status& st) {
    std::unique_lock lk(mu);
    if (!isSender && st.message().rfind("old rx", 0) == 0 && !inHook) {
      inHook = true;
      cv.notify_all();
      cv.wait_for(lk, 10s, [&] { return committed; });
      return false;
    }
    if (st.message().rfind("old ", 0) == 0) return true;  // the retired paths: expected
    otherFailure = st.ToString();
    return false;
  });

  // The peer (the sender) commits first and closes its old socket: EOF on the old receive path.
  auto b = socketPair();
  ASSERT_EQ(b.error, "");
  c.tx->setEpoch(2);
  c.oldTx->shutdown();
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 10s, [&] { return inHook; })) << "the old path's EOF never reached the hook";
  }
  // This end commits while the progress thread is in the hook, as Failover::commitLocked does.
  c.rx->setEpoch(2);
  auto nrx = std::make_unique<transport::SocketRecvPath>(c.engine.get(), std::move(b.in), c.rx.get(), "new rx", 0);
  auto* newRx = nrx.get();
  c.rx->setPath(std::move(nrx));
  c.engine->replace(c.oldRx, newRx);
  {
    std::lock_guard lk(mu);
    committed = true;
  }
  cv.notify_all();

  // The sender's new path resends from what the receiver has, and the connection goes on.
  auto ntx = std::make_unique<transport::SocketSendPath>(c.engine.get(), std::move(b.out), c.tx.get(), "new tx", c.rx->received());
  auto* newTx = ntx.get();
  c.tx->setPath(std::move(ntx));
  newTx->start();
  c.engine->remove(c.oldTx);
  EXPECT_FALSE(c.rx->failed()) << "the close of a replaced path failed the connection: " << c.rx->error().ToString();
  for (uint64_t s = 5; s <= 12 && !c.rx->failed(); ++s) {
    roundTrip(*c.tx, *c.rx, s);
    if (HasFatalFailure()) break;
  }
  EXPECT_FALSE(c.tx->failed());
  EXPECT_FALSE(c.rx->failed());
  // No completion (and no hook call) after this: the hook's state goes before the ports.
  c.engine->stop();
  std::lock_guard lk(mu);
  EXPECT_EQ(otherFailure, "");
}

}  // namespace
