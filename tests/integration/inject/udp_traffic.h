// Real UDP traffic between testbed hosts, counted at the receiver: the outside view that the
// injection tests judge a fault by. Sockets are made inside the namespaces by threads that
// setns() there, so one test process drives every host.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "reccl/common/status.h"

namespace reccl::test {

class UdpReceiver {
 public:
  UdpReceiver() = default;
  ~UdpReceiver();
  UdpReceiver(const UdpReceiver&) = delete;
  UdpReceiver& operator=(const UdpReceiver&) = delete;

  // Binds addr:port inside netns and starts counting datagrams.
  Status start(const std::string& netns, const std::string& addr, uint16_t port);
  // Waits until `expected` datagrams arrived or none arrived for quietMs (long enough for a loaded
  // machine's deferred softirq work to deliver what is still in flight); returns the count.
  uint64_t finish(uint64_t expected, int quietMs = 1000);
  uint64_t count() const { return count_.load(); }

 private:
  void loop();
  int fd_ = -1;
  std::atomic<uint64_t> count_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Sends `count` datagrams of `payload` bytes from netns to addr:port (source port `sport`, 0:
// any), paced in small bursts so that a receiver on a loaded 2-core machine keeps up. Returns
// how many sendto() accepted.
Result<uint64_t> sendUdp(const std::string& netns, const std::string& addr, uint16_t port,
                         uint64_t count, uint16_t sport = 0, size_t payload = 64);

}  // namespace reccl::test
