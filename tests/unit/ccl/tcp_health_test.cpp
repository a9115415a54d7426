// The TCP stall verdict (transport/tcp_health.h), table-driven over TCP_INFO samples: no socket.
#include <gtest/gtest.h>

#include <string>
#include <vector>

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
      {"not established (closing)", sample(3, 9000, 3, 3, 0, false), false},
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

}  // namespace
}  // namespace reccl::transport
