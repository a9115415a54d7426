// A TCP port for a rendezvous that the kernel never hands out on its own: free now, and out of
// the ephemeral range (net.ipv4.ip_local_port_range of the calling thread's network namespace),
// so no outgoing connection or port-0 listener of another process is given it before the caller
// binds it (a port bound and released inside the range can be). `consecutive` ports from the
// result on are all free (a job that takes port+1 for a second communicator).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <random>

namespace reccl {

// The port, or -errno (-EADDRNOTAVAIL: the ephemeral range leaves no room, or nothing is free).
inline int freePortOutsideEphemeralRange(int consecutive = 1) {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  constexpr int kLowest = 10000;  // clear of the well-known and commonly configured ports
  const int span = consecutive - 1;
  int from = kLowest, to = low - 1 - span;  // below the range, where Linux leaves room by default
  if (to - from < 1000) {
    from = high + 1;
    to = 65535 - span;
  }
  if (to < from || from < 1) return -EADDRNOTAVAIL;
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(from, to);
  auto bindable = [](int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // as a listener binds
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    sa.sin_port = htons(static_cast<uint16_t>(port));
    bool ok = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
    close(fd);
    return ok;
  };
  for (int tries = 0; tries < 1000; ++tries) {
    int port = pick(rng), k = 0;
    while (k < consecutive && bindable(port + k)) ++k;
    if (k == consecutive) return port;
  }
  return -EADDRNOTAVAIL;
}

}  // namespace reccl
