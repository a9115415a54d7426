#include "detector_daemon.h"

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "reccl/common/deadline.h"
#include "reccl/common/log.h"
#include "reccl/detector/daemon_protocol.h"

namespace reccl::detector {

using nlohmann::json;

namespace {
enum : uint64_t { kListen = 1ull << 40, kMetrics = 2ull << 40, kSignal = 3ull << 40, kEvents = 4ull << 40 };

Status epollAdd(int ep, int fd, uint64_t tag) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) return Status::FromErrno(errno, "detectord: epoll_ctl");
  return Status::Ok();
}

void logJson(const char* level, const json& fields) {
  json j = fields;
  j["ts_ns"] = monotonicNs();
  j["level"] = level;
  std::string line = j.dump() + "\n";
  (void)!write(STDOUT_FILENO, line.data(), line.size());
}
}  // namespace

Result<std::unique_ptr<DetectorDaemon>> DetectorDaemon::create(DaemonOptions opts) {
  std::unique_ptr<DetectorDaemon> d(new DetectorDaemon());
  d->opts_ = std::move(opts);
  // Signals first: a SIGTERM during BPF probing must still end in a clean exit.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  d->signalFd_.reset(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!d->signalFd_) return Status::FromErrno(errno, "detectord: signalfd");
  d->epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!d->epoll_) return Status::FromErrno(errno, "detectord: epoll_create1");

  RECCL_ASSIGN_OR_RETURN(d->det_, Detector::create(d->opts_.detector));
  for (const auto& w : d->det_->watched()) d->fixedWatches_.insert(w.key);
  DaemonMetrics* m = &d->metrics_;
  d->det_->setSignalObserver([m](const LinkSignal& s, uint64_t now) { m->onSignal(s, now); });
  RECCL_TRY(d->setupSocket());
  RECCL_TRY(d->setupMetrics());
  RECCL_TRY(epollAdd(d->epoll_.get(), d->signalFd_.get(), kSignal));
  RECCL_TRY(epollAdd(d->epoll_.get(), d->det_->eventFd(), kEvents));
  RECCL_TRY(d->det_->start());
  auto st = d->det_->status();
  json sources = json::array();
  for (const auto& s : st.sources)
    sources.push_back({{"name", s.name}, {"active", s.active}, {"reason", s.reason}});
  logJson("info", {{"msg", "started"}, {"socket", d->opts_.socketPath}, {"metrics_port", d->metricsPort_},
                   {"mode", st.mode}, {"sources", sources}});
  return d;
}

DetectorDaemon::~DetectorDaemon() {
  clients_.clear();
  if (det_) det_->stop();
  det_.reset();  // detaches and unloads every BPF program
  if (socketCreated_) unlink(opts_.socketPath.c_str());
}

Status DetectorDaemon::setupSocket() {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string& path = opts_.socketPath;
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    return Status(Errc::kInvalidArgument, "socket: bad path '" + path + "'");
  gid_t gid = 0;
  if (!opts_.group.empty()) {
    group* g = getgrnam(opts_.group.c_str());
    if (!g) return Status(Errc::kNotFound, "group: no group '" + opts_.group + "'");
    gid = g->gr_gid;
  }
  auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    std::string dir = path.substr(0, slash);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::FromErrno(errno, "detectord: mkdir " + dir);
  }
  // A socket file left by a crashed daemon: remove it only if nobody answers on it.
  int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  if (probe >= 0) {
    if (connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      close(probe);
      return Status(Errc::kExists, "detectord: another daemon serves " + path);
    }
    close(probe);
  }
  unlink(path.c_str());
  listen_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listen_) return Status::FromErrno(errno, "detectord: socket");
  mode_t old = umask(0177);
  int rc = bind(listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  umask(old);
  if (rc != 0) return Status::FromErrno(errno, "detectord: bind " + path);
  socketCreated_ = true;
  if (!opts_.group.empty()) {
    if (chown(path.c_str(), 0, gid) != 0) return Status::FromErrno(errno, "detectord: chown " + path);
    if (chmod(path.c_str(), 0660) != 0) return Status::FromErrno(errno, "detectord: chmod " + path);
  }
  if (listen(listen_.get(), 64) != 0) return Status::FromErrno(errno, "detectord: listen");
  return epollAdd(epoll_.get(), listen_.get(), kListen);
}

Status DetectorDaemon::setupMetrics() {
  if (opts_.metricsPort < 0) return Status::Ok();
  if (opts_.metricsPort > 65535)
    return Status(Errc::kInvalidArgument, "metrics-port: must be 0..65535");
  metricsListen_.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!metricsListen_) return Status::FromErrno(errno, "detectord: metrics socket");
  int one = 1;
  setsockopt(metricsListen_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(opts_.metricsPort));
  if (inet_pton(AF_INET, opts_.metricsAddr.c_str(), &a.sin_addr) != 1)
    return Status(Errc::kInvalidArgument, "metrics-addr: not an IPv4 address '" + opts_.metricsAddr + "'");
  if (bind(metricsListen_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
    return Status::FromErrno(errno, "detectord: bind metrics port " + std::to_string(opts_.metricsPort));
  socklen_t len = sizeof(a);
  getsockname(metricsListen_.get(), reinterpret_cast<sockaddr*>(&a), &len);
  metricsPort_ = ntohs(a.sin_port);
  if (listen(metricsListen_.get(), 16) != 0) return Status::FromErrno(errno, "detectord: listen metrics");
  return epollAdd(epoll_.get(), metricsListen_.get(), kMetrics);
}

void DetectorDaemon::acceptClient() {
  for (;;) {
    int fd = accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    Client c;
    c.sock.reset(fd);
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      c.pid = cred.pid;
      c.uid = static_cast<int>(cred.uid);
    }
    if (!epollAdd(epoll_.get(), fd, static_cast<uint64_t>(fd)).ok()) continue;
    logJson("info", {{"msg", "client connected"}, {"pid", c.pid}, {"uid", c.uid}});
    clients_.emplace(fd, std::move(c));
  }
}

void DetectorDaemon::dropClient(int fd, const char* why) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  logJson("info", {{"msg", "client gone"}, {"pid", it->second.pid}, {"why", why}});
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  std::set<LinkKey> watches = std::move(it->second.watches);
  clients_.erase(it);
  // Links another client still watches stay; the rest give their slots back (a daemon serving
  // job after job would otherwise run out of its RECCL_LINK_MAX_SLOTS slots).
  for (const auto& k : watches) releaseWatch(k);
}

void DetectorDaemon::releaseWatch(const LinkKey& key) {
  if (fixedWatches_.count(key)) return;
  for (const auto& [fd, c] : clients_)
    if (c.watches.count(key)) return;
  if (Status st = det_->removeWatch(key); !st.ok())
    logJson("warn", {{"msg", "unwatch failed"}, {"netns_ino", key.netnsIno}, {"ifindex", key.ifindex},
                     {"error", st.message()}});
}

void DetectorDaemon::onClient(int fd) {
  // A request with a field of the wrong type ("ifindex":"x") makes nlohmann throw: that client is
  // dropped, the daemon keeps serving the others.
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  for (;;) {
    auto msg = recvMessage(fd);
    if (!msg.ok()) {
      if (msg.status().code() == Errc::kTimeout) return;
      dropClient(fd, msg.status().message().c_str());
      return;
    }
    try {
      handleRequest(it->second, msg.value());
    } catch (const std::exception& e) {
      dropClient(fd, "malformed request");
      return;
    }
    if (clients_.find(fd) == clients_.end()) return;
  }
}

void DetectorDaemon::handleRequest(Client& c, const std::string& text) {
  json req = json::parse(text, nullptr, false);
  int fd = c.sock.get();
  if (req.is_discarded() || !req.is_object() || !req.contains("op") || !req["op"].is_string()) {
    dropClient(fd, "malformed request");
    return;
  }
  std::string op = req["op"];
  json reply{{"op", op}};
  if (op == "hello") {
    auto st = det_->status();
    json sources = json::array();
    for (const auto& s : st.sources) sources.push_back({{"name", s.name}, {"active", s.active}});
    reply["version"] = kDaemonProtocolVersion;
    reply["mode"] = st.mode;
    reply["sources"] = sources;
  } else if (op == "watch") {
    WatchSpec spec{req.value("netns", ""), req.value("dev", "")};
    auto parsed = parseWatchSpec(spec.netns.empty() ? spec.ifname : spec.netns + ":" + spec.ifname);
    Result<WatchedLink> w = parsed.ok() ? det_->addWatch(spec) : Result<WatchedLink>(parsed.status());
    if (w.ok()) {
      c.watches.insert(w->key);
      reply.update({{"ok", true}, {"slot", w->slot}, {"netns_ino", w->key.netnsIno},
                    {"ifindex", w->key.ifindex}, {"ifname", w->ifname}});
    } else {
      reply.update({{"ok", false}, {"error", w.status().message()}});
    }
  } else if (op == "unwatch") {
    LinkKey k{req.value("netns_ino", 0u), req.value("ifindex", 0u)};
    bool had = c.watches.erase(k) > 0;
    reply["ok"] = had;
    if (!had) reply["error"] = "link not watched by this client";
    if (had) releaseWatch(k);
  } else if (op == "ping") {
    // Liveness: answered from the same loop that delivers events, so a pong proves both work.
    reply["seq"] = req.contains("seq") && req["seq"].is_number_unsigned() ? req["seq"].get<uint64_t>() : 0;
  } else if (op == "status") {
    std::string s = statusToJson(det_->status(), static_cast<int>(clients_.size()));
    if (!sendMessage(fd, s).ok()) dropClient(fd, "send failed");
    return;
  } else if (op == "map") {
    auto mfd = det_->linkStateShareFd();
    if (mfd.ok()) {
      reply.update({{"ok", true}, {"slots", RECCL_LINK_MAX_SLOTS}, {"slot_size", sizeof(reccl_link_slot)}});
      if (!sendMessage(fd, reply.dump(), mfd->get()).ok()) dropClient(fd, "send failed");
      return;
    }
    reply.update({{"ok", false}, {"error", mfd.status().message()}});
  } else {
    reply.update({{"ok", false}, {"error", "unknown op '" + op + "'"}});
  }
  if (!sendMessage(fd, reply.dump()).ok()) dropClient(fd, "send failed");
}

void DetectorDaemon::serveMetrics() {
  for (;;) {
    int fd = accept4(metricsListen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    UniqueFd conn(fd);
    // Small, bounded exchange: a client that does not send its request line in 200 ms is dropped.
    char buf[2048];
    size_t got = 0;
    Deadline dl = Deadline::afterMs(200);
    while (got < sizeof(buf) - 1 && !dl.expired()) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, dl.remainingMsForPoll()) <= 0) break;
      ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
      buf[got] = 0;
      if (std::strstr(buf, "\r\n\r\n") || std::strstr(buf, "\n\n")) break;
    }
    buf[got] = 0;
    std::string resp;
    if (std::strncmp(buf, "GET /metrics", 12) == 0) {
      std::string body = metrics_.render(det_->status(), static_cast<int>(clients_.size()));
      resp = "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n" + body;
    } else {
      resp = "HTTP/1.0 404 Not Found\r\nContent-Length: 10\r\n\r\nnot found\n";
    }
    size_t off = 0;
    while (off < resp.size()) {
      ssize_t n = send(fd, resp.data() + off, resp.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  }
}

void DetectorDaemon::deliverEvents() {
  uint64_t now = monotonicNs();
  for (const auto& e : det_->drain()) {
    metrics_.onEvent(e, now);
    std::string msg = eventToJson(e);
    logJson("info", json::parse(msg));
    std::vector<int> failed;
    for (auto& [fd, c] : clients_) {
      if (!c.watches.count(e.link)) continue;
      // A client that stops reading fills its socket buffer; it is dropped rather than
      // allowed to stall every other client.
      if (!sendMessage(fd, msg).ok()) failed.push_back(fd);
    }
    for (int fd : failed) dropClient(fd, "not reading events");
  }
}

Status DetectorDaemon::run() {
  epoll_event evs[32];
  for (;;) {
    int n = epoll_wait(epoll_.get(), evs, 32, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "detectord: epoll_wait");
    }
    for (int i = 0; i < n; ++i) {
      uint64_t t = evs[i].data.u64;
      if (t == kSignal) {
        signalfd_siginfo si{};
        (void)!read(signalFd_.get(), &si, sizeof(si));
        logJson("info", {{"msg", "stopping"}, {"signal", strsignal(static_cast<int>(si.ssi_signo))}});
        return Status::Ok();
      } else if (t == kListen) {
        acceptClient();
      } else if (t == kMetrics) {
        serveMetrics();
      } else if (t == kEvents) {
        deliverEvents();
      } else {
        onClient(static_cast<int>(t));
      }
    }
  }
}

}  // namespace reccl::detector
