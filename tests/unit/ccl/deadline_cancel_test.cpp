// Deadlines (reccl/common/deadline.h): never() has no instant until within() gives it one; a
// cancellable deadline is expired once its flag is set, a poll slice never outlasts
// Deadline::kCancelPollMs, within() keeps the flag; and the socket waits on such a deadline (a
// connect retrying a refused port, a receive with nothing coming) end with kAborted soon after
// the flag, long before the deadline: what an aborted non-blocking init relies on.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>

#include "../free_port.h"
#include "reccl/common/deadline.h"
#include "reccl/common/unique_fd.h"
#include "transport/socket_util.h"

namespace reccl {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(DeadlineCancel, TheFlagEndsTheDeadlineAndWithinKeepsIt) {
  std::atomic<bool> flag{false};
  const Deadline plain = Deadline::afterMs(60000);
  const Deadline d = plain.cancellable(&flag);
  EXPECT_FALSE(d.expired());
  EXPECT_FALSE(d.cancelled());
  EXPECT_EQ(d.pollSliceMs(), Deadline::kCancelPollMs);
  EXPECT_GT(plain.pollSliceMs(), Deadline::kCancelPollMs);  // no flag: the whole time left
  EXPECT_EQ(Deadline::never().cancellable(&flag).pollSliceMs(), Deadline::kCancelPollMs);
  const Deadline shorter = d.within(10);
  EXPECT_LT(shorter.at(), d.at());
  EXPECT_EQ(d.within(120000).at(), d.at());  // never later than the deadline itself
  flag.store(true);
  EXPECT_TRUE(d.expired());
  EXPECT_TRUE(d.cancelled());
  EXPECT_TRUE(shorter.cancelled());
  EXPECT_EQ(d.pollSliceMs(), 0);
  EXPECT_EQ(d.remainingMsForPoll(), 0);
  EXPECT_FALSE(plain.expired());
}

// never(): no instant, a poll waits without a timeout (-1), until a flag ends it; within() gives
// it one.
TEST(DeadlineCancel, NeverHasNoInstantUntilWithinGivesItOne) {
  std::atomic<bool> flag{false};
  const Deadline n = Deadline::never();
  const Deadline c = n.cancellable(&flag);
  EXPECT_TRUE(n.isNever());
  EXPECT_TRUE(c.isNever());
  EXPECT_FALSE(n.within(1000).isNever());
  EXPECT_FALSE(Deadline::afterMs(60000).isNever());
  EXPECT_FALSE(n.expired());
  EXPECT_EQ(n.remainingMsForPoll(), -1);
  flag.store(true);
  EXPECT_TRUE(c.expired());
  EXPECT_EQ(c.remainingMsForPoll(), 0);
  EXPECT_FALSE(n.expired());
}

// Two owners: either flag ends a deadline made cancellable twice; within() keeps both.
TEST(DeadlineCancel, EitherOfTwoFlagsEndsIt) {
  for (int which : {0, 1}) {
    std::atomic<bool> a{false}, b{false};
    const Deadline d = Deadline::afterMs(60000).cancellable(&a).cancellable(&b);
    const Deadline shorter = d.within(30000);
    EXPECT_FALSE(d.cancelled());
    EXPECT_EQ(d.pollSliceMs(), Deadline::kCancelPollMs);
    (which ? b : a).store(true);
    EXPECT_TRUE(d.cancelled()) << "flag " << which;
    EXPECT_TRUE(shorter.cancelled()) << "flag " << which;
    EXPECT_EQ(d.pollSliceMs(), 0) << "flag " << which;
  }
}

// Sets `flag` after `ms` on a thread of its own.
std::thread setLater(std::atomic<bool>& flag, std::chrono::milliseconds ms) {
  return std::thread([&flag, ms] {
    std::this_thread::sleep_for(ms);
    flag.store(true);
  });
}

TEST(DeadlineCancel, AConnectRetryingARefusedPortEndsSoonAfterTheFlag) {
  const uint16_t port = test::freePort();
  ASSERT_NE(port, 0);
  std::atomic<bool> flag{false};
  const auto t0 = Clock::now();
  std::thread t = setLater(flag, 200ms);
  auto fd = transport::connectTcp(transport::Endpoint{htonl(INADDR_LOOPBACK), port}, 0, "",
                                  Deadline::afterMs(30000).cancellable(&flag));
  const auto took = Clock::now() - t0;
  t.join();
  ASSERT_FALSE(fd.ok()) << "something listens on port " << port;
  EXPECT_EQ(fd.status().code(), Errc::kAborted) << fd.status().message();
  EXPECT_LT(took, 1s);
}

TEST(DeadlineCancel, AReceiveWithNothingComingEndsSoonAfterTheFlag) {
  std::array<int, 2> sv{};
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv.data()), 0);
  UniqueFd a(sv[0]), b(sv[1]);
  std::atomic<bool> flag{false};
  const auto t0 = Clock::now();
  std::thread t = setLater(flag, 200ms);
  std::array<std::byte, 8> buf{};
  Status s = transport::socketIo(a.get(), Deadline::afterMs(30000).cancellable(&flag)).recv(buf);
  const auto took = Clock::now() - t0;
  t.join();
  EXPECT_EQ(s.code(), Errc::kAborted) << s.message();
  EXPECT_GE(took, 150ms);
  EXPECT_LT(took, 1s);
}

}  // namespace
}  // namespace reccl
