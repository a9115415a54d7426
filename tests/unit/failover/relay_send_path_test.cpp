// The origin's relay send path against a receiver that acknowledges steps the path has not
// finished writing into the pipe (after a migration the path resends from the step the handshake
// reported, and the receiver may already have more). The ack must wait until the step is written
// whole: an ack frees the step's slot, the algorithm writes a later step into it, and the path
// would then write the later step's bytes as the earlier step. Let through at once, the ack makes
// the relay write steps 9.. in the places of steps 2.. .
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
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

TEST(RelaySendPath, AnAckAheadOfTheWriteIsHeldUntilTheStepIsWritten) {
  auto pipe = RelayPipe::create(kChunk);  // one ring holds less than two frames
  ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
  // The relay's end, mapped as a relay rank maps what it was sent.
  auto relay = RelayPipe::attach(UniqueFd(dup(pipe->memFd())), UniqueFd(dup(pipe->originWakeFd())),
                                 UniqueFd(dup(pipe->relayWakeFd())));
  ASSERT_TRUE(relay.ok()) << relay.status().ToString();
  int ctrl[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctrl), 0);
  UniqueFd relayCtrl(ctrl[1]);

  channel::PortEnv env;
  std::atomic<bool> pathFailed{false};
  env.pathFailureHook.install([&](const channel::PortId&, const channel::Path*, bool, const Status&) {
    pathFailed.store(true);
    return false;
  });
  auto mem = channel::ConnMemory::anonymous(kSlots, kChunk);
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  channel::SendPort tx(channel::PortId{0, 1, 0}, std::move(mem).value(), &env);
  auto rp = std::make_unique<RelaySendPath>(RelayLink{std::move(pipe).value(), UniqueFd(ctrl[0]), 2}, &tx,
                                            "relay tx", 0);
  auto* path = rp.get();
  tx.setPath(std::move(rp));
  path->start();

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
  std::vector<std::byte> frame(channel::kStepHeaderBytes + kChunk);
  auto up = relay->up();
  for (uint64_t s = 1; s <= kSteps; ++s) {
    size_t got = 0;
    while (got < frame.size() && !d.expired()) {
      size_t n = up.read(std::span<std::byte>(frame).subspan(got));
      got += n;
      if (n > 0)
        relay->wakeOrigin();
      else
        std::this_thread::sleep_for(100us);
    }
    ASSERT_EQ(got, frame.size()) << "step " << s << " never came whole";
    auto h = channel::decodeStepHeader(std::span<const std::byte>(frame.data(), channel::kStepHeaderBytes));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_EQ(h->step, s) << "the pipe carried step " << h->step << " in the place of step " << s;
    for (size_t i = 0; i < kChunk; ++i)
      ASSERT_EQ(frame[channel::kStepHeaderBytes + i], patternByte(s, i)) << "step " << s << " byte " << i;
  }
  poster.join();
  EXPECT_EQ(postError, "");
  EXPECT_GE(tx.acked(), kSlots) << "the held ack never reached the port";
  EXPECT_FALSE(pathFailed.load());
  EXPECT_FALSE(tx.failed());
}

}  // namespace
}  // namespace reccl::failover
