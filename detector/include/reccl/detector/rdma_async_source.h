// RDMA asynchronous events (ibv_get_async_event) of every verbs device: port error/active and
// device fatal, mapped to the netdev each port is bound to. Needs no privilege; absent on
// machines without verbs devices, where open() says so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/detector/link_signal.h"

namespace reccl::detector {

class RdmaAsyncSource {
 public:
  // kUnsupported when built without verbs or when no verbs device exists.
  static Result<std::unique_ptr<RdmaAsyncSource>> open(uint32_t ownNetnsIno);
  ~RdmaAsyncSource();
  RdmaAsyncSource(const RdmaAsyncSource&) = delete;
  RdmaAsyncSource& operator=(const RdmaAsyncSource&) = delete;

  // One fd per device; each readable when an async event waits.
  std::vector<int> fds() const;
  // Reads waiting events of the device owning fd; appends signals for ports bound to a netdev.
  void drain(int fd, uint64_t nowNs, std::vector<LinkSignal>& out);
  std::vector<std::string> devices() const;
  std::string deviceOf(int fd) const;  // "" when no device owns fd

 private:
  RdmaAsyncSource() = default;
  struct Device;
  std::vector<std::unique_ptr<Device>> devices_;
  uint32_t netnsIno_ = 0;
};

}  // namespace reccl::detector
