// A TCP port for a test's rendezvous: free now, and out of the kernel's ephemeral range, so no
// connection or port-0 listener of a test running beside this one is given it before the test
// binds it (a port bound and released inside the range can be).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <random>

namespace reccl::test {

inline bool portBindable(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  sa.sin_port = htons(port);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  close(fd);
  return ok;
}

inline uint16_t freePort() {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  // Below the range when it leaves room, else above it.
  int from = low > 11000 ? 10000 : high + 1, to = low > 11000 ? low - 1 : 65535;
  std::mt19937 pick(std::random_device{}());
  std::uniform_int_distribution<int> in(from, to);
  for (int tries = 0; tries < 1000; ++tries) {
    auto port = static_cast<uint16_t>(in(pick));
    if (portBindable(port)) return port;
  }
  return 0;  // nothing free: the caller's bind fails and says so
}

}  // namespace reccl::test
