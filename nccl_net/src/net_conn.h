// One NCCL net connection: a direction between two processes, carried by a two-rank reccl
// communicator (rank 0 sends, rank 1 receives) and a thread that runs its calls. The
// communicator brings reccl's failover to the connection: its channels spread over the host's
// NICs, move to another NIC on a link fault and resend what the receiver had not applied, so a
// request completes once, with its bytes intact, or fails with why.
//
// NCCL may send fewer bytes than the receive it matches was posted for, and reccl's receives are
// of an exact size, so a message travels as a head of kHeadBytes, always: a 16-byte header (its
// size, tag and a mark) and its first bytes; what does not fit follows as a second reccl send.
// A message of up to 4080 bytes is then one reccl call at each end, like NCCL's own small
// messages. Requests run in the order they were posted, which is how NCCL matches them.
//
// Threads: NCCL's proxy thread calls post(), test() and the destructor; the connection's own
// thread makes the reccl calls. mu_ guards the queue and the request states between them.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "nccl_net_abi.h"
#include "reccl/common/status.h"
#include "reccl/reccl.h"

namespace reccl::nccl_net {

class NetConn;

struct NetRequest {
  NetConn* conn = nullptr;
  void* data = nullptr;
  size_t bytes = 0;  // a send's size; a receive's capacity, then what arrived
  int tag = 0;
  enum class State { kFree, kQueued, kDone, kFailed } state = State::kFree;
};

class NetConn {
 public:
  enum class Role { kSend, kRecv };
  static constexpr size_t kHeadBytes = 4096;

  // Joins the communicator of `id` without waiting (rank 0 for kSend): ready() says when done.
  // `homeNic` set (a per-NIC device's): unless RECCL_NCHANNELS says otherwise the communicator
  // has one channel, which starts on that NIC's rail when this end sends
  // (core::CommOptions::homeNic) and fails over to the other NICs.
  static Result<std::unique_ptr<NetConn>> start(Role role, const recclUniqueId& id, const std::string& homeNic);
  // Waits for nothing: the calls still queued are failed and one inside reccl is cut short by
  // breaking the communicator, which is then freed (destroyed when it was idle and whole).
  ~NetConn();
  NetConn(const NetConn&) = delete;
  NetConn& operator=(const NetConn&) = delete;

  // True once the communicator is made; an error when making it failed (its reason).
  Result<bool> ready();
  // Queues a send of `bytes` or a receive of up to `bytes`. nullptr while NCCL_NET_MAX_REQUESTS
  // are in flight (NCCL tries again); an error once the connection failed.
  Result<NetRequest*> post(void* data, size_t bytes, int tag);
  // done: the request ended (its bytes in *bytes) and was freed; an error when it failed (also
  // freed). Not done: still queued or running.
  Result<bool> test(NetRequest* r, size_t* bytes);
  // The communicator's counters; false before it was made.
  bool stats(recclCommStats_t* out);

  Role role() const { return role_; }

 private:
  NetConn(Role role, recclComm_t comm);
  void loop();
  Status run(NetRequest* r);
  // Breaks the communicator (reccl's internal abort): a call inside returns, later calls fail
  // at once and the peer's fail with a lost peer; frees nothing. From any thread.
  void breakComm();

  const Role role_;
  recclComm_t comm_;
  bool made_ = false;  // the init finished: calls and the thread may start

  std::mutex mu_;
  std::condition_variable cv_;
  std::array<NetRequest, NCCL_NET_MAX_REQUESTS> requests_{};
  std::deque<NetRequest*> queue_;
  bool stop_ = false;
  bool inCall_ = false;
  bool broken_ = false;  // breakComm() ran: stats are not read any more
  Status failed_;  // the first failure: every later request fails with it
  std::thread thread_;
  std::array<std::byte, kHeadBytes> head_;  // the connection's thread only
};

}  // namespace reccl::nccl_net
