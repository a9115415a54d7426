// An rtnetlink socket bound in a chosen network namespace. A socket stays in the namespace it
// was created in, so one socket per namespace is enough for any number of operations there.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "reccl/common/status.h"

struct mnl_socket;
struct nlmsghdr;

namespace reccl::netlink {

class NlSocket {
 public:
  // Socket in the calling thread's current namespace.
  static Result<NlSocket> open();
  // Socket in /run/netns/NAME (empty: current namespace).
  static Result<NlSocket> openInNetns(std::string_view netns);

  NlSocket(NlSocket&& o) noexcept;
  NlSocket& operator=(NlSocket&& o) noexcept;
  NlSocket(const NlSocket&) = delete;
  NlSocket& operator=(const NlSocket&) = delete;
  ~NlSocket();

  // A zeroed message buffer with header of the given type and flags (NLM_F_REQUEST added) and a
  // fresh sequence number. The returned header lives in this socket's buffer until the next call.
  nlmsghdr* startMessage(uint16_t type, uint16_t flags);
  // Sends the message with NLM_F_ACK and waits for the kernel's answer (deadline: 5 s).
  // `what` names the operation in the error text: "create veth a/b: File exists".
  Status request(nlmsghdr* nlh, std::string_view what);
  // Sends a get/dump request and calls onMessage for each reply until done.
  Status query(nlmsghdr* nlh, std::string_view what,
               const std::function<void(const nlmsghdr*)>& onMessage);

  int fd() const noexcept;

 private:
  explicit NlSocket(mnl_socket* s);
  Status receive(uint32_t seq, std::string_view what,
                 const std::function<void(const nlmsghdr*)>* onMessage);

  mnl_socket* sock_ = nullptr;
  uint32_t portId_ = 0;
  uint32_t seq_ = 0;
  std::vector<char> buf_;
};

}  // namespace reccl::netlink
