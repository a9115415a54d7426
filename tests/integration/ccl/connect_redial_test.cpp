// A dial whose SYN is lost is dialled again after kConnectAttemptMs, not left to the kernel's
// initial retransmission timeout (1 s). A listener whose accept queue is full drops an incoming
// SYN without an answer, as a lossy link does: that is the lost SYN here, on loopback. (Backlog 1,
// not 0: with 0 even the first connection needs a SYN cookie.)
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "reccl/common/unique_fd.h"
#include "transport/socket_util.h"

namespace {

using namespace reccl;

TEST(ConnectTcp, ASynLostToAFullAcceptQueueIsDialledAgainBeforeTheKernelRetransmits) {
  UniqueFd l(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(l);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(l.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(listen(l.get(), 1), 0);  // two connections waiting to be accepted fill the queue
  socklen_t len = sizeof(sa);
  ASSERT_EQ(getsockname(l.get(), reinterpret_cast<sockaddr*>(&sa), &len), 0);
  const transport::Endpoint dst{sa.sin_addr.s_addr, ntohs(sa.sin_port)};

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

}  // namespace
