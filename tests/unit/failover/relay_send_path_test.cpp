// The origin's relay send path, with the relay's end of its pipe read by the test.
// - An ack ahead of the write: after a migration the path resends from the step the handshake
//   reported, and the receiver may already have more. The ack must wait until the step is
//   written whole: an ack frees the step's slot, the algorithm writes a later step into it, and
//   the path would then write the later step's bytes as the earlier step. Let through at once,
//   the ack makes the relay write steps 9.. in the places of steps 2.. .
// - The epoch: a path writes each header with its own epoch and never writes the port's slots.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "channel/conn_memory.h"
#include "channel/port.h"
#include "channel/step_header.h"
#include "failover/relay/relay_paths.h"
#include "failover/relay/relay_pipe.h"
#include "reccl/common/deadline.h"

namespace reccl::failover {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kSlots = 8;
constexpr size_t kChunk = 64 * 1024;
constexpr uint64_t kSteps = 2 * kSlots;  // every slot used twice

std::byte patternByte(uint64_t step, size_t i) { return std::byte(static_cast<uint8_t>(step * 131 + i * 7 + 1)); }

// A send port with a relay send path on a fresh pipe, and the relay's end of the pipe.
struct Origin {
  channel::PortEnv env;
  std::atomic<bool> pathFailed{false};
  std::optional<channel::SendPort> tx;
  std::optional<RelayPipe> relay;
  UniqueFd relayCtrl;
  RelaySendPath* path = nullptr;
  std::string error;

  // beforePath runs on the port before its path is made; the path sends the steps after
  // sentBefore.
  Origin(const std::function<void(channel::SendPort&)>& beforePath = {}, uint64_t sentBefore = 0) {
    auto pipe = RelayPipe::create(kChunk);  // one ring holds less than two frames
    if (!pipe.ok()) {
      error = pipe.status().ToString();
      return;
    }
    // The relay's end, mapped as a relay rank maps what it was sent.
    auto r = RelayPipe::attach(UniqueFd(dup(pipe->memFd())), UniqueFd(dup(pipe->originWakeFd())),
                               UniqueFd(dup(pipe->relayWakeFd())));
    if (!r.ok()) {
      error = r.status().ToString();
      return;
    }
    relay.emplace(std::move(r).value());
    int ctrl[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctrl) != 0) {
      error = "socketpair failed";
      return;
    }
    relayCtrl.reset(ctrl[1]);
    env.pathFailureHook.install([this](const channel::PortId&, const channel::Path*, bool, const Status&) {
      pathFailed.store(true);
      return false;
    });
    auto mem = channel::ConnMemory::anonymous(kSlots, kChunk);
    if (!mem.ok()) {
      error = mem.status().ToString();
      return;
    }
    tx.emplace(channel::PortId{0, 1, 0}, std::move(mem).value(), &env);
    if (beforePath) beforePath(*tx);
    auto rp = std::make_unique<RelaySendPath>(RelayLink{std::move(pipe).value(), UniqueFd(ctrl[0]), 2}, &*tx,
                                              "relay tx", sentBefore);
    path = rp.get();
    tx->setPath(std::move(rp));
    path->start();
  }

  // The next frame the relay reads (header and `payload` bytes), or an empty vector at the
  // deadline.
  std::vector<std::byte> readFrame(size_t payload, const Deadline& d) {
    std::vector<std::byte> frame(channel::kStepHeaderBytes + payload);
    auto up = relay->up();
    size_t got = 0;
    while (got < frame.size() && !d.expired()) {
      size_t n = up.read(std::span<std::byte>(frame).subspan(got));
      got += n;
      if (n > 0)
        relay->wakeOrigin();
      else
        std::this_thread::sleep_for(100us);
    }
    if (got < frame.size()) frame.clear();
    return frame;
  }
};

TEST(RelaySendPath, AnAckAheadOfTheWriteIsHeldUntilTheStepIsWritten) {
  Origin o;
  ASSERT_EQ(o.error, "");
  channel::SendPort& tx = *o.tx;
  auto& relay = o.relay;

  // The algorithm: steps 1..16, each slot's second step only once the first is acknowledged.
  channel::CollDesc desc{1, kSteps * kChunk, -1, channel::CollKind::kAllReduce, 7, 0};
  std::atomic<uint64_t> posted{0};
  std::string postError;
  std::thread poster([&] {
    for (uint64_t s = 1; s <= kSteps; ++s) {
      auto slot = tx.acquire(Deadline::afterMs(20000));
      if (!slot.ok()) {
        postError = "acquire step " + std::to_string(s) + ": " + slot.status().ToString();
        return;
      }
      for (size_t i = 0; i < kChunk; ++i) (*slot)[i] = patternByte(s, i);
      Status st = tx.post(kChunk, desc);
      if (!st.ok()) {
        postError = "post step " + std::to_string(s) + ": " + st.ToString();
        return;
      }
      posted.store(s);
    }
  });
  Deadline d = Deadline::afterMs(20000);
  while (posted.load() < kSlots && !d.expired() && postError.empty()) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(posted.load(), kSlots) << postError;

  // The receiver says it has steps 1..8 before the relay read a byte of them.
  std::array<std::byte, channel::kAckFrameBytes> ack{};
  channel::encodeAck(channel::AckFrame{tx.epoch(), kSlots},
                     std::span<std::byte, channel::kAckFrameBytes>(ack.data(), ack.size()));
  ASSERT_EQ(relay->down().write(ack), ack.size());
  relay->wakeOrigin();
  std::this_thread::sleep_for(300ms);
  EXPECT_LT(tx.acked(), kSlots) << "the ack reached the port while the path was still writing the steps";

  // The relay reads every frame: each is the step it should be, bit for bit.
  for (uint64_t s = 1; s <= kSteps; ++s) {
    auto frame = o.readFrame(kChunk, d);
    ASSERT_FALSE(frame.empty()) << "step " << s << " never came whole";
    auto h = channel::decodeStepHeader(std::span<const std::byte>(frame.data(), channel::kStepHeaderBytes));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_EQ(h->step, s) << "the pipe carried step " << h->step << " in the place of step " << s;
    for (size_t i = 0; i < kChunk; ++i)
      ASSERT_EQ(frame[channel::kStepHeaderBytes + i], patternByte(s, i)) << "step " << s << " byte " << i;
  }
  poster.join();
  EXPECT_EQ(postError, "");
  EXPECT_GE(tx.acked(), kSlots) << "the held ack never reached the port";
  EXPECT_FALSE(o.pathFailed.load());
  EXPECT_FALSE(tx.failed());
}

// Steps posted under epoch 1 and written after the connection moved to epoch 2 (a migrated path
// resending from the slots) go into the pipe with epoch 2, and the slots keep the headers as
// posted: an old path still writing while its successor starts cannot change the epoch the
// successor sends.
TEST(RelaySendPath, APathWritesItsEpochAndLeavesTheSlotsAsPosted) {
  channel::CollDesc desc{1, 3 * kChunk, -1, channel::CollKind::kAllReduce, 7, 0};
  Origin o([&](channel::SendPort& tx) {
    for (uint64_t s = 1; s <= 3; ++s) {
      auto slot = tx.acquire(Deadline::afterMs(5000));
      ASSERT_TRUE(slot.ok()) << slot.status().ToString();
      for (size_t i = 0; i < kChunk; ++i) (*slot)[i] = patternByte(s, i);
      ASSERT_TRUE(tx.post(kChunk, desc).ok());
    }
    tx.setEpoch(2);
  });
  ASSERT_EQ(o.error, "");
  Deadline d = Deadline::afterMs(20000);
  for (uint64_t s = 1; s <= 3; ++s) {
    auto frame = o.readFrame(kChunk, d);
    ASSERT_FALSE(frame.empty()) << "step " << s << " never came whole";
    auto h = channel::decodeStepHeader(std::span<const std::byte>(frame.data(), channel::kStepHeaderBytes));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_EQ(h->step, s);
    EXPECT_EQ(h->epoch, 2u) << "step " << s << " went with the epoch it was posted under";
    for (size_t i = 0; i < kChunk; ++i)
      ASSERT_EQ(frame[channel::kStepHeaderBytes + i], patternByte(s, i)) << "step " << s << " byte " << i;
    auto slot = channel::decodeStepHeader(
        std::span<const std::byte>(o.tx->memory().slotFrame(s), channel::kStepHeaderBytes));
    ASSERT_TRUE(slot.ok()) << slot.status().ToString();
    EXPECT_EQ(slot->epoch, 1u) << "the path wrote its epoch into the slot of step " << s;
  }
  EXPECT_FALSE(o.pathFailed.load());
}

}  // namespace
}  // namespace reccl::failover
