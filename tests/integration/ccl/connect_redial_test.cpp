// A dial whose SYN is lost is dialled again after kConnectAttemptMs, not left to the kernel's
// initial retransmission timeout (1 s). A listener whose accept queue is full drops an incoming
// SYN without an answer, as a lossy link does: that is the lost SYN here, on loopback. (Backlog 1,
// not 0: with 0 even the first connection needs a SYN cookie.) And what a refusal means, at
// set-up and for failover.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "reccl/common/unique_fd.h"
#include "transport/socket_util.h"

namespace {

using namespace reccl;

// A TCP socket bound to a free loopback port, and that port.
struct Bound {
  UniqueFd fd;
  transport::Endpoint at;
};
Bound bindLoopback() {
  Bound b{UniqueFd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)), {}};
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  if (!b.fd || bind(b.fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      getsockname(b.fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return {};
  b.at = {sa.sin_addr.s_addr, ntohs(sa.sin_port)};
  return b;
}

TEST(ConnectTcp, ASynLostToAFullAcceptQueueIsDialledAgainBeforeTheKernelRetransmits) {
  Bound b = bindLoopback();
  ASSERT_TRUE(b.fd);
  UniqueFd& l = b.fd;
  ASSERT_EQ(listen(l.get(), 1), 0);  // two connections waiting to be accepted fill the queue
  const transport::Endpoint dst = b.at;

  auto first = transport::connectTcp(dst, 0, "", Deadline::afterMs(5000));
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto filler = transport::connectTcp(dst, 0, "", Deadline::afterMs(5000));
  ASSERT_TRUE(filler.ok()) << filler.status().message();

  // Dialled while the queue is full: the SYN is dropped. A place frees 50 ms later.
  using namespace std::chrono;
  const auto t0 = steady_clock::now();
  Result<UniqueFd> second = Status(Errc::kInternal, "not dialled");
  std::thread dial([&] { second = transport::connectTcp(dst, 0, "", Deadline::afterMs(5000)); });
  std::this_thread::sleep_for(milliseconds(50));
  UniqueFd a1(accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC));
  dial.join();
  ASSERT_TRUE(a1);
  const auto ms = duration_cast<milliseconds>(steady_clock::now() - t0).count();
  ASSERT_TRUE(second.ok()) << second.status().message();
  // Dialled again at kConnectAttemptMs (200 ms); the kernel alone would send the SYN again at
  // 1 s. The bound sits between the two with room for a loaded machine.
  EXPECT_LT(ms, 800) << "the lost SYN was left to the kernel's retransmission";
  UniqueFd a2(accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC));
  UniqueFd a3(accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC));
  EXPECT_TRUE(a2 && a3) << "the filler and the redialled connection are the ones the listener holds";
}

// A refusal (the far kernel's reset: nothing listens on the port) is dialled again until the
// deadline at set-up, where the peer may not listen yet, and ends the dial at once for failover's
// connects (OnRefused::kFinal), where the peer listens from its set-up until it is destroyed.
TEST(ConnectTcp, ARefusalIsRetriedAtSetUpAndFinalForFailover) {
  // A port that is bound but not listening: refused, and no one else can take it meanwhile.
  Bound b = bindLoopback();
  ASSERT_TRUE(b.fd);
  UniqueFd& hold = b.fd;
  const transport::Endpoint dst = b.at;
  using namespace std::chrono;

  auto t0 = steady_clock::now();
  auto retried = transport::connectTcp(dst, 0, "", Deadline::afterMs(300));
  auto ms = duration_cast<milliseconds>(steady_clock::now() - t0).count();
  ASSERT_FALSE(retried.ok());
  EXPECT_NE(retried.status().code(), Errc::kPeerFailure) << retried.status().message();
  EXPECT_GE(ms, 290) << "a refusal at set-up ended the dial before its deadline";

  t0 = steady_clock::now();
  auto refused = transport::connectTcp(dst, 0, "", Deadline::afterMs(5000), transport::OnRefused::kFinal);
  ms = duration_cast<milliseconds>(steady_clock::now() - t0).count();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Errc::kPeerFailure) << refused.status().message();
  EXPECT_NE(refused.status().message().find("refused"), std::string::npos) << refused.status().message();
  EXPECT_LT(ms, 1000) << "a final refusal was dialled again";

  // Listening now: the same dial connects.
  ASSERT_EQ(listen(hold.get(), 4), 0);
  auto ok = transport::connectTcp(dst, 0, "", Deadline::afterMs(5000), transport::OnRefused::kFinal);
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

}  // namespace
