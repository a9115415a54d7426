// A rank that dials a peer's port before the peer listens must keep dialling, never take a
// connection to itself for the peer: with the ephemeral range narrowed to the port it dials
// (its own network namespace), every connect() is given that port as its source and the kernel's
// simultaneous open connects the socket to itself.
#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "transport/socket_util.h"

namespace {

using namespace reccl;

// In the calling thread's own network namespace (it goes with the thread): lo up and the
// ephemeral range set to one port. An empty string on success, else why not.
std::string ownNamespaceWithOneEphemeralPort(uint16_t port) {
  if (unshare(CLONE_NEWNET) != 0) return std::string("unshare(CLONE_NEWNET): ") + strerror(errno);
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool up = s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &ifr) == 0);
  if (s >= 0) close(s);
  if (!up) return std::string("bringing lo up: ") + strerror(errno);
  std::ofstream("/proc/sys/net/ipv4/ip_local_port_range") << port << ' ' << port;
  std::ifstream check("/proc/sys/net/ipv4/ip_local_port_range");
  int lo = 0, hi = 0;
  check >> lo >> hi;
  if (lo != port || hi != port) return "the ephemeral range could not be narrowed to one port";
  return "";
}

TEST(ConnectTcp, AConnectionThatOpensOntoItselfIsNoPeer) {
  constexpr uint16_t kPort = 40000;
  std::string skip;
  bool connected = false;
  Status status, listened;
  std::thread t([&] {
    skip = ownNamespaceWithOneEphemeralPort(kPort);
    if (!skip.empty()) return;
    transport::Endpoint dst{htonl(INADDR_LOOPBACK), kPort};
    {
      auto fd = transport::connectTcp(dst, 0, "", Deadline::afterMs(300));
      connected = fd.ok();
      status = fd.ok() ? Status::Ok() : fd.status();
    }
    // The peer then binds its port: the dial left nothing on it.
    auto l = transport::listenTcp(htonl(INADDR_ANY), kPort, nullptr);
    listened = l.ok() ? Status::Ok() : l.status();
  });
  t.join();
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_FALSE(connected) << "connectTcp returned a socket connected to itself as the peer";
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(listened.ok()) << "the peer cannot bind the port it was dialled at: " << listened.message();
}

}  // namespace
