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

namespace reccl::detector {

using nlohmann::json;

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
  json h = json::parse(c->hello_, nullptr, false);
  if (h.is_discarded() || h.value("version", 0) != kDaemonProtocolVersion)
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
    if (j.is_discarded() || !j.is_object()) return Status(Errc::kProtocol, "detectord: malformed message");
    std::string op = j.value("op", "");
    if (op == "event") {
      auto e = eventFromJson(msg);
      if (e.ok()) events_.push_back(std::move(e).value());
      if (wantOp.empty()) timeoutMs = 0, dl = Deadline::afterMs(0);
      continue;
    }
    if (!wantOp.empty() && op == wantOp) {
      *reply = std::move(msg);
      return Status::Ok();
    }
    return Status(Errc::kProtocol, "detectord: unexpected message '" + op + "'");
  }
}

Result<std::string> DetectorClient::request(const std::string& text, const std::string& op, UniqueFd* fd) {
  RECCL_TRY(sendMessage(sock_.get(), text));
  std::string reply;
  RECCL_TRY(pump(timeoutMs_, op, &reply, fd));
  return reply;
}

Result<WatchedLink> DetectorClient::watch(const WatchSpec& spec) {
  RECCL_ASSIGN_OR_RETURN(std::string r, request(json{{"op", "watch"}, {"netns", spec.netns}, {"dev", spec.ifname}}.dump(), "watch"));
  json j = json::parse(r, nullptr, false);
  if (!j.value("ok", false)) return Status(Errc::kInvalidArgument, j.value("error", std::string("watch refused")));
  WatchedLink w;
  w.netns = spec.netns;
  w.ifname = spec.ifname;
  w.slot = j.value("slot", uint32_t(RECCL_LINK_NO_SLOT));
  w.key = {j.value("netns_ino", 0u), j.value("ifindex", 0u)};
  return w;
}

Status DetectorClient::unwatch(LinkKey key) {
  RECCL_ASSIGN_OR_RETURN(std::string r, request(json{{"op", "unwatch"}, {"netns_ino", key.netnsIno}, {"ifindex", key.ifindex}}.dump(), "unwatch"));
  json j = json::parse(r, nullptr, false);
  if (!j.value("ok", false)) return Status(Errc::kNotFound, j.value("error", std::string("unwatch refused")));
  return Status::Ok();
}

Result<std::string> DetectorClient::statusJson() { return request(json{{"op", "status"}}.dump(), "status"); }

Result<std::unique_ptr<MappedLinkState>> DetectorClient::mapLinkState() {
  UniqueFd mapFd;
  RECCL_ASSIGN_OR_RETURN(std::string r, request(json{{"op", "map"}}.dump(), "map", &mapFd));
  json j = json::parse(r, nullptr, false);
  if (!j.value("ok", false)) return Status(Errc::kUnsupported, j.value("error", std::string("no link-state map")));
  if (!mapFd) return Status(Errc::kProtocol, "detectord: map reply without a file descriptor");
  size_t bytes = sizeof(reccl_link_slot) * RECCL_LINK_MAX_SLOTS;
  long page = sysconf(_SC_PAGESIZE);
  bytes = (bytes + page - 1) / page * page;
  void* m = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, mapFd.get(), 0);
  if (m == MAP_FAILED) return Status::FromErrno(errno, "detectord: mmap link-state map");
  return std::make_unique<MappedLinkState>(static_cast<const reccl_link_slot*>(m), bytes);
}

Result<std::vector<LinkEvent>> DetectorClient::receive(int timeoutMs) {
  if (events_.empty()) {
    std::string none;
    Deadline dl = Deadline::afterMs(timeoutMs);
    do {
      RECCL_TRY(pump(dl.remainingMsForPoll(), "", &none, nullptr));
    } while (events_.empty() && !dl.expired());
  } else {
    std::string none;
    RECCL_TRY(pump(0, "", &none, nullptr));
  }
  std::vector<LinkEvent> out(events_.begin(), events_.end());
  events_.clear();
  return out;
}

}  // namespace reccl::detector
