#include "udp_traffic.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <vector>

#include "reccl/common/unique_fd.h"
#include "reccl/netlink/netns_guard.h"

namespace reccl::test {

namespace {

Result<sockaddr_in> makeAddr(const std::string& addr, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1)
    return Status{Errc::kInvalidArgument, "bad address " + addr};
  return sa;
}

}  // namespace

UdpReceiver::~UdpReceiver() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

Status UdpReceiver::start(const std::string& netns, const std::string& addr, uint16_t port) {
  RECCL_ASSIGN_OR_RETURN(sockaddr_in sa, makeAddr(addr, port));
  {
    RECCL_ASSIGN_OR_RETURN(auto guard, netlink::NetnsGuard::enter(netns));
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd_ < 0) return Status::FromErrno(errno, "udp socket");
  }
  // Room for every datagram of a test run, so the receiver never drops one itself.
  int buf = 64 << 20;
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0)
    return Status::FromErrno(errno, "bind " + addr + ":" + std::to_string(port));
  thread_ = std::thread([this] { loop(); });
  return {};
}

void UdpReceiver::loop() {
  char buf[2048];
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    while (::recv(fd_, buf, sizeof(buf), 0) >= 0) count_++;
  }
  // What arrived while this thread was not running (a loaded machine) is counted too.
  while (::recv(fd_, buf, sizeof(buf), 0) >= 0) count_++;
}

uint64_t UdpReceiver::finish(uint64_t expected, int quietMs) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  uint64_t last = count_.load();
  auto lastChange = std::chrono::steady_clock::now();
  while (count_.load() < expected && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    uint64_t c = count_.load();
    if (c != last) {
      last = c;
      lastChange = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - lastChange > std::chrono::milliseconds(quietMs)) {
      break;
    }
  }
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  return count_.load();
}

Result<uint64_t> sendUdp(const std::string& netns, const std::string& addr, uint16_t port,
                         uint64_t count, uint16_t sport, size_t payload) {
  RECCL_ASSIGN_OR_RETURN(sockaddr_in dst, makeAddr(addr, port));
  UniqueFd fd;
  {
    RECCL_ASSIGN_OR_RETURN(auto guard, netlink::NetnsGuard::enter(netns));
    fd.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd) return Status::FromErrno(errno, "udp socket");
  }
  if (sport) {
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_port = htons(sport);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0)
      return Status::FromErrno(errno, "bind source port");
  }
  std::vector<char> data(payload, 'x');
  uint64_t sent = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (::sendto(fd.get(), data.data(), data.size(), 0, reinterpret_cast<sockaddr*>(&dst),
                 sizeof(dst)) == static_cast<ssize_t>(data.size()))
      ++sent;
    if (i % 100 == 99) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return sent;
}

}  // namespace reccl::test
