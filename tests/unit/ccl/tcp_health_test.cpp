// The TCP stall verdict (transport/tcp_health.h): table-driven over TCP_INFO samples, and over
// real loopback connections for what the kernel reports of one this end closed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "transport/socket_util.h"
#include "transport/tcp_health.h"

namespace reccl::transport {
namespace {

TcpSample sample(uint32_t unacked, uint32_t lastAckMs, uint32_t backoff, uint32_t retrans, uint32_t probes,
                 bool established = true) {
  TcpSample s;
  s.ok = true;
  s.established = established;
  s.unacked = unacked;
  s.lastAckRecvMs = lastAckMs;
  s.backoff = backoff;
  s.retransmits = retrans;
  s.probes = probes;
  return s;
}

TEST(CclSocketTcpStall, DataOrProbesUnansweredForTheStallTime) {
  const int64_t stall = 2000;  // keepalive idle 2 s: a probe counts once it waited 2 s + 2 s
  struct Case {
    std::string name;
    TcpSample s;
    bool stalled;
  };
  const std::vector<Case> cases = {
      {"idle and healthy", sample(0, 5000, 0, 0, 0), false},
      {"data in flight, acked recently", sample(3, 100, 0, 0, 0), false},
      {"data in flight, no ack for the stall time, a timeout fired", sample(3, 2000, 1, 0, 0), true},
      {"the same with retransmits counted instead of backoff", sample(3, 2500, 0, 2, 0), true},
      {"just sent after idling: old last ack, no timeout yet", sample(3, 9000, 0, 0, 0), false},
      {"no ack for a little less than the stall time", sample(3, 1999, 2, 1, 0), false},
      {"a keepalive probe unanswered for the stall time after it went out", sample(0, 4000, 0, 0, 1), true},
      {"a keepalive probe just out", sample(0, 3999, 0, 0, 1), false},
      {"closed here, nothing heard for the stall time", sample(0, 2000, 0, 0, 0, false), true},
      {"closing, its last ack within the stall time", sample(0, 1999, 0, 0, 0, false), false},
  };
  for (const auto& c : cases) EXPECT_EQ(tcpStalled(c.s, stall), c.stalled) << c.name;
  TcpSample unread;  // getsockopt failed
  EXPECT_FALSE(tcpStalled(unread, stall));
}

TEST(CclSocketTcpStall, KeepaliveIdleIsTheStallTimesWholeSeconds) {
  EXPECT_EQ(keepaliveIdleMs(2000), 2000u);
  EXPECT_EQ(keepaliveIdleMs(2999), 2000u);
  EXPECT_EQ(keepaliveIdleMs(500), 1000u);  // at least a second
  EXPECT_EQ(keepaliveIdleMs(0), 1000u);
}

// The path in force of a connection whose passive commit failed after it retired the old path:
// its socket shut down (or reset, when the link was down) by this end, which no progress engine
// reports and no keepalive probes. The kernel's view must make it stalled once the stall time
// has passed, and not before; an open idle connection beside it must not be.
TEST(CclSocketTcpStall, AConnectionThisEndClosedIsStalledOnceQuietForTheStallTime) {
  constexpr int64_t kStallMs = 300;
  Endpoint ep;
  auto l = listenTcp(htonl(INADDR_LOOPBACK), 0, &ep);
  ASSERT_TRUE(l.ok()) << l.status().message();
  struct Pair {
    UniqueFd out, in;
  };
  auto connect = [&]() {
    Pair p;
    auto out = connectTcp(ep, 0, "", Deadline::afterMs(5000));
    EXPECT_TRUE(out.ok()) << out.status().message();
    auto in = acceptTcp(l->get(), Deadline::afterMs(5000));
    EXPECT_TRUE(in.ok()) << in.status().message();
    if (!out.ok() || !in.ok()) return p;
    p.out = std::move(out).value();
    p.in = std::move(in).value();
    std::array<std::byte, 8> b{};
    EXPECT_TRUE(sendAll(p.out.get(), b, Deadline::afterMs(5000)).ok());
    EXPECT_TRUE(recvAll(p.in.get(), b, Deadline::afterMs(5000)).ok());
    return p;
  };
  Pair open = connect(), shut = connect(), reset = connect();
  ASSERT_TRUE(open.out && shut.out && reset.out);
  ::shutdown(shut.out.get(), SHUT_RDWR);  // Path::shutdown of a socket path
  abortTcp(reset.out.get());              // Path::abandon
  for (int fd : {shut.out.get(), reset.out.get()}) {
    TcpSample s = sampleTcp(fd);
    ASSERT_TRUE(s.ok);
    EXPECT_FALSE(s.established);
  }
  EXPECT_FALSE(tcpStalled(sampleTcp(shut.out.get()), kStallMs)) << "its FIN was acked just now";
  std::this_thread::sleep_for(std::chrono::milliseconds(kStallMs + 100));
  EXPECT_TRUE(tcpStalled(sampleTcp(shut.out.get()), kStallMs)) << "shut down here, quiet for the stall time";
  EXPECT_TRUE(tcpStalled(sampleTcp(reset.out.get()), kStallMs)) << "reset here, quiet for the stall time";
  TcpSample idle = sampleTcp(open.out.get());
  EXPECT_TRUE(idle.ok && idle.established);
  EXPECT_FALSE(tcpStalled(idle, kStallMs)) << "an open idle connection is not stalled";
}

}  // namespace
}  // namespace reccl::transport
