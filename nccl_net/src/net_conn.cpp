#include "net_conn.h"

#include "api/comm_access.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace reccl::nccl_net {

namespace {

// Marks a header, so that bytes of some other message read as one fail loudly.
constexpr uint32_t kHeaderMagic = 0x7ecc1e7u;

struct MessageHeader {
  uint32_t magic = kHeaderMagic;
  int32_t tag = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(MessageHeader) == 16);
static_assert(NetConn::kHeadBytes > sizeof(MessageHeader));
constexpr size_t kHeadPayloadBytes = NetConn::kHeadBytes - sizeof(MessageHeader);

Errc errcOf(recclResult_t r) {
  switch (r) {
    case recclSystemError: return Errc::kSystem;
    case recclInvalidArgument: return Errc::kInvalidArgument;
    case recclInvalidUsage: return Errc::kInvalidUsage;
    case recclRemoteError: return Errc::kPeerFailure;
    case recclTimeout: return Errc::kTimeout;
    case recclNetworkError: return Errc::kLinkFailure;
    case recclAborted: return Errc::kAborted;
    default: return Errc::kInternal;
  }
}

Status callStatus(const char* what, recclResult_t r, recclComm_t comm) {
  if (r == recclSuccess) return Status::Ok();
  std::string why = std::string(what) + ": " + recclGetErrorString(r);
  const char* last = recclGetLastError(comm);
  if (last && *last) why += std::string(": ") + last;
  return Status(errcOf(r), why);
}

// A receive waits for its message as long as the connection lives, as NCCL's own transports do:
// NCCL posts receives ahead of the data, and an application may pause between its collectives
// for longer than any collective deadline. A dead peer or a connection with no path left fails
// it through reccl's failover all the same. RECCL_TIMEOUT_MS, when set, bounds every call.
recclConfig_t connConfig() {
  recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  if (std::getenv("RECCL_TIMEOUT_MS") == nullptr) cfg.timeoutMs = INT_MAX;
  cfg.commName = "nccl-net";
  return cfg;
}

}  // namespace

Result<std::unique_ptr<NetConn>> NetConn::start(Role role, const recclUniqueId& id, const std::string& homeNic) {
  recclConfig_t cfg = connConfig();
  // A per-NIC device's connection carries on its NIC alone; the channels of NCCL's several
  // connections per peer are its parallel streams.
  if (!homeNic.empty() && std::getenv("RECCL_NCHANNELS") == nullptr) cfg.nChannels = 1;
  recclComm_t comm = nullptr;
  recclResult_t r = api::initRankOnNic(&comm, 2, id, role == Role::kSend ? 0 : 1, &cfg, homeNic);
  if (r != recclSuccess && r != recclInProgress) {
    Status why = callStatus("reccl communicator init", r, nullptr);
    if (comm) recclCommAbort(comm);
    return why;
  }
  return std::unique_ptr<NetConn>(new NetConn(role, comm));
}

NetConn::NetConn(Role role, recclComm_t comm) : role_(role), comm_(comm) {
  for (auto& req : requests_) req.conn = this;
}

NetConn::~NetConn() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!made_) {
    // A pending init is ended by aborting it: its waits end at their next poll slice.
    recclCommAbort(comm_);
    return;
  }
  bool broken = false;
  {
    std::lock_guard lk(mu_);
    broken = broken_ || inCall_ || !queue_.empty();
  }
  // Requests NCCL gave up on: the communicator is broken first, which ends a call inside reccl
  // and refuses the next one at once but frees nothing, so the connection's thread can never
  // meet a freed communicator; it is freed once that thread is gone.
  if (broken) breakComm();
  thread_.join();
  if (broken) recclCommAbort(comm_);
  else recclCommDestroy(comm_);
}

void NetConn::breakComm() {
  {
    std::lock_guard lk(mu_);
    broken_ = true;
  }
  if (core::Comm* c = api::commImpl(comm_)) c->abort();
}

Result<bool> NetConn::ready() {
  if (made_) return true;
  recclResult_t state = recclInProgress;
  recclResult_t r = recclCommGetAsyncError(comm_, &state);
  if (r != recclSuccess) return callStatus("reccl communicator init", r, comm_);
  if (state == recclInProgress) return false;
  if (state != recclSuccess) return callStatus("reccl communicator init", state, comm_);
  thread_ = std::thread([this] { loop(); });
  made_ = true;
  return true;
}

Result<NetRequest*> NetConn::post(void* data, size_t bytes, int tag) {
  std::lock_guard lk(mu_);
  if (!failed_.ok()) return failed_;
  for (auto& req : requests_) {
    if (req.state != NetRequest::State::kFree) continue;
    req.data = data;
    req.bytes = bytes;
    req.tag = tag;
    req.state = NetRequest::State::kQueued;
    queue_.push_back(&req);
    cv_.notify_all();
    return &req;
  }
  return static_cast<NetRequest*>(nullptr);
}

Result<bool> NetConn::test(NetRequest* r, size_t* bytes) {
  std::lock_guard lk(mu_);
  switch (r->state) {
    case NetRequest::State::kDone:
      *bytes = r->bytes;
      r->state = NetRequest::State::kFree;
      return true;
    case NetRequest::State::kFailed:
      r->state = NetRequest::State::kFree;
      return failed_;
    case NetRequest::State::kQueued: return false;
    case NetRequest::State::kFree: break;
  }
  return Status(Errc::kInvalidUsage, "test of a request that already ended");
}

bool NetConn::stats(recclCommStats_t* out) {
  std::lock_guard lk(mu_);
  if (!made_ || broken_) return false;
  return recclCommGetStats(comm_, out) == recclSuccess;
}

void NetConn::loop() {
  std::unique_lock lk(mu_);
  while (true) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (stop_ || !failed_.ok()) break;
    NetRequest* r = queue_.front();
    inCall_ = true;
    lk.unlock();
    Status s = run(r);
    lk.lock();
    inCall_ = false;
    cv_.notify_all();
    if (!s.ok()) {
      if (failed_.ok()) failed_ = s;
      // The peer learns at once that this end gave up (its calls fail with the lost peer)
      // instead of waiting for a message that will not come. (A failed reccl call has broken
      // the communicator already; a bad header has not.)
      lk.unlock();
      breakComm();
      lk.lock();
      break;
    }
    queue_.pop_front();
    r->state = NetRequest::State::kDone;
  }
  // Whatever is left fails with the first failure (or with the close).
  if (failed_.ok()) failed_ = Status(Errc::kAborted, "the connection was closed");
  for (NetRequest* r : queue_) r->state = NetRequest::State::kFailed;
  queue_.clear();
}

Status NetConn::run(NetRequest* r) {
  const int peer = role_ == Role::kSend ? 1 : 0;
  auto* bytes = static_cast<std::byte*>(r->data);
  MessageHeader h;
  if (role_ == Role::kSend) {
    h.tag = r->tag;
    h.bytes = r->bytes;
    const size_t first = std::min(r->bytes, kHeadPayloadBytes);
    std::memcpy(head_.data(), &h, sizeof(h));
    if (first) std::memcpy(head_.data() + sizeof(h), bytes, first);
    RECCL_TRY(callStatus("reccl send", recclSend(head_.data(), head_.size(), recclUint8, peer, comm_, nullptr), comm_));
    if (r->bytes == first) return Status::Ok();
    return callStatus("reccl send", recclSend(bytes + first, r->bytes - first, recclUint8, peer, comm_, nullptr), comm_);
  }
  RECCL_TRY(callStatus("reccl receive", recclRecv(head_.data(), head_.size(), recclUint8, peer, comm_, nullptr), comm_));
  std::memcpy(&h, head_.data(), sizeof(h));
  if (h.magic != kHeaderMagic) return Status(Errc::kProtocol, "a message header without its mark arrived");
  // NCCL tags a connection's messages with the sender's rank at both ends.
  if (h.tag != r->tag)
    return Status(Errc::kInvalidUsage, "a message tagged " + std::to_string(h.tag) + " arrived for a receive tagged " +
                                           std::to_string(r->tag));
  if (h.bytes > r->bytes)
    return Status(Errc::kInvalidUsage, "a message of " + std::to_string(h.bytes) + " bytes arrived for a receive of " +
                                           std::to_string(r->bytes) + " bytes");
  r->bytes = h.bytes;
  const size_t first = std::min<size_t>(h.bytes, kHeadPayloadBytes);
  if (first) std::memcpy(bytes, head_.data() + sizeof(h), first);
  if (h.bytes == first) return Status::Ok();
  return callStatus("reccl receive", recclRecv(bytes + first, h.bytes - first, recclUint8, peer, comm_, nullptr), comm_);
}

}  // namespace reccl::nccl_net
