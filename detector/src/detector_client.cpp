#include "reccl/detector/detector_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "reccl/common/deadline.h"
#include "reccl/detector/daemon_protocol.h"
#include "reccl/detector/netns.h"

namespace reccl::detector {

using nlohmann::json;

namespace {

// A reply of {"ok": bool, "error": string}: a refusal is `refused` with the daemon's reason; a
// reply of another shape is kProtocol (never an exception out of the library).
Status okReply(const std::string& text, const char* op, Errc refused) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("ok") || !j["ok"].is_boolean())
    return Status(Errc::kProtocol, std::string("detectord: ") + op + " reply without a boolean 'ok'");
  if (j["ok"].get<bool>()) return Status::Ok();
  const auto err = j.find("error");
  std::string why = err != j.end() && err->is_string() ? err->get<std::string>() : std::string(op) + " refused";
  return Status(refused, why);
}

}  // namespace

MappedLinkState::~MappedLinkState() {
  if (slots_) munmap(const_cast<reccl_link_slot*>(slots_), bytes_);
}

Result<std::unique_ptr<DetectorClient>> DetectorClient::connect(const std::string& path, int timeoutMs) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    return Status(Errc::kInvalidArgument, "socket: bad daemon socket path '" + path + "'");
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  // Non-blocking connect: a daemon that stopped accepting (its backlog full) must not hang the
  // caller; a unix-socket connect completes at once or fails with EAGAIN.
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::FromErrno(errno, "detectord: socket");
  std::unique_ptr<DetectorClient> c(new DetectorClient());
  c->sock_.reset(fd);
  c->timeoutMs_ = timeoutMs;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    if (err == ENOENT || err == ECONNREFUSED)
      return Status(Errc::kNotFound, "detectord: no daemon listening on " + path);
    if (err == EAGAIN || err == EWOULDBLOCK)
      return Status(Errc::kTimeout, "detectord: daemon on " + path + " is not accepting connections");
    return Status::FromErrno(err, "detectord: connect " + path);
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) return Status::FromErrno(errno, "detectord: fcntl");
  RECCL_ASSIGN_OR_RETURN(c->hello_, c->request(json{{"op", "hello"}, {"version", kDaemonProtocolVersion}}.dump(), "hello"));
  c->lastAliveNs_ = monotonicNs();
  json h = json::parse(c->hello_, nullptr, false);
  if (h.is_object() && h.contains("ok") && h["ok"].is_boolean() && !h["ok"].get<bool>()) {
    const json& e = h.contains("error") ? h["error"] : json();
    return Status(Errc::kProtocol, "detectord: hello refused: " + (e.is_string() ? e.get<std::string>() : std::string("?")));
  }
  if (!h.is_object() || !h.contains("version") || !h["version"].is_number_integer() ||
      h["version"].get<int>() != kDaemonProtocolVersion)
    return Status(Errc::kProtocol, "detectord: protocol version mismatch");
  return c;
}

Status DetectorClient::pump(int timeoutMs, const std::string& wantOp, std::string* reply, UniqueFd* fd) {
  Deadline dl = Deadline::afterMs(timeoutMs);
  for (;;) {
    pollfd p{sock_.get(), POLLIN, 0};
    int r = poll(&p, 1, dl.remainingMsForPoll());
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "detectord: poll");
    }
    if (r == 0) {
      if (wantOp.empty()) return Status::Ok();
      return Status(Errc::kTimeout, "detectord: no reply to '" + wantOp + "' within " +
                                        std::to_string(timeoutMs) + " ms");
    }
    RECCL_ASSIGN_OR_RETURN(std::string msg, recvMessage(sock_.get(), fd));
    json j = json::parse(msg, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("op") || !j["op"].is_string())
      return Status(Errc::kProtocol, "detectord: malformed message (" + std::to_string(msg.size()) + " bytes)");
    std::string op = j["op"];
    if (op == "event") {
      // An event we cannot read is an error, not a skip: the caller then reconciles link state.
      RECCL_ASSIGN_OR_RETURN(LinkEvent e, eventFromJson(msg));
      events_.push_back(std::move(e));
      if (wantOp.empty()) timeoutMs = 0, dl = Deadline::afterMs(0);
      continue;
    }
    if (op == "ping") {  // a pong (any answer to a ping proves the daemon's loop runs)
      onPong(j.contains("seq") && j["seq"].is_number_unsigned() ? j["seq"].get<uint64_t>() : 0);
      if (wantOp.empty()) timeoutMs = 0, dl = Deadline::afterMs(0);
      continue;
    }
    if (!wantOp.empty() && op == wantOp) {
      *reply = std::move(msg);
      return Status::Ok();
    }
    if (!wantOp.empty() && op == "error" && j.contains("error") && j["error"].is_string())  // refused
      return Status(Errc::kProtocol, "detectord: " + wantOp + " refused: " + j["error"].get<std::string>());
    return Status(Errc::kProtocol, "detectord: unexpected message '" + op + "'");
  }
}

void DetectorClient::onPong(uint64_t seq) {
  // Only the outstanding ping's pong counts; an old daemon answers without seq (0).
  if (pingSentNs_ && (seq == pingSeq_ || seq == 0)) {
    pingSentNs_ = 0;
    lastAliveNs_ = monotonicNs();
    ++pongs_;
  }
}

Status DetectorClient::keepAlive(int periodMs, int deadlineMs) {
  uint64_t now = monotonicNs();
  if (pingSentNs_) {
    if (now - pingSentNs_ >= static_cast<uint64_t>(deadlineMs) * 1000000ull)
      return Status(Errc::kTimeout, "detectord: no pong within " + std::to_string(deadlineMs) + " ms (daemon hung)");
    return Status::Ok();
  }
  if (now - lastAliveNs_ < static_cast<uint64_t>(periodMs) * 1000000ull) return Status::Ok();
  // The socket is blocking, but a ping is tiny and the daemon drains its clients; a full buffer
  // fails the send (MSG_DONTWAIT) and counts as a hung daemon.
  std::string text = json{{"op", "ping"}, {"seq", ++pingSeq_}}.dump();
  if (::send(sock_.get(), text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
    int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK)
      return Status(Errc::kTimeout, "detectord: socket full, daemon not reading (hung)");
    return Status::FromErrno(err, "detectord: send ping");
  }
  pingSentNs_ = now;
  return Status::Ok();
}

Result<std::string> DetectorClient::request(const std::string& text, const std::string& op, UniqueFd* fd, int sendFd) {
  RECCL_TRY(sendMessage(sock_.get(), text, sendFd));
  std::string reply;
  RECCL_TRY(pump(timeoutMs_, op, &reply, fd));
  return reply;
}

Result<WatchedLink> DetectorClient::watch(const WatchSpec& spec) {
  // The namespace travels as a descriptor opened here, with this process's own rights.
  RECCL_ASSIGN_OR_RETURN(UniqueFd ns, openNetnsFd(spec.netns));
  RECCL_ASSIGN_OR_RETURN(std::string r, request(json{{"op", "watch"}, {"netns", spec.netns}, {"dev", spec.ifname}}.dump(),
                                                "watch", nullptr, ns.get()));
  return watchReplyFromJson(spec, r);
}

Status DetectorClient::unwatch(LinkKey key) {
  RECCL_ASSIGN_OR_RETURN(std::string r, request(json{{"op", "unwatch"}, {"netns_ino", key.netnsIno}, {"ifindex", key.ifindex}}.dump(), "unwatch"));
  return okReply(r, "unwatch", Errc::kNotFound);
}

Result<std::string> DetectorClient::statusJson() { return request(json{{"op", "status"}}.dump(), "status"); }

Result<std::unique_ptr<MappedLinkState>> DetectorClient::mapLinkState() {
  UniqueFd mapFd;
  RECCL_ASSIGN_OR_RETURN(std::string r, request(json{{"op", "map"}}.dump(), "map", &mapFd));
  RECCL_TRY(okReply(r, "map", Errc::kUnsupported));
  if (!mapFd) return Status(Errc::kProtocol, "detectord: map reply without a file descriptor");
  size_t bytes = sizeof(reccl_link_slot) * RECCL_LINK_MAX_SLOTS;
  long page = sysconf(_SC_PAGESIZE);
  bytes = (bytes + page - 1) / page * page;
  void* m = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, mapFd.get(), 0);
  if (m == MAP_FAILED) return Status::FromErrno(errno, "detectord: mmap link-state map");
  return std::make_unique<MappedLinkState>(static_cast<const reccl_link_slot*>(m), bytes);
}

Status DetectorClient::receive(int timeoutMs, std::vector<LinkEvent>* out) {
  std::string none;
  Status st;
  if (events_.empty()) {
    Deadline dl = Deadline::afterMs(timeoutMs);
    do {
      st = pump(dl.remainingMsForPoll(), "", &none, nullptr);
    } while (st.ok() && events_.empty() && !dl.expired());
  } else {
    st = pump(0, "", &none, nullptr);
  }
  // Whatever arrived before an error is handed over with it.
  out->insert(out->end(), events_.begin(), events_.end());
  events_.clear();
  return st;
}

}  // namespace reccl::detector
