#include "detector_daemon.h"

#include <grp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "reccl/common/deadline.h"
#include "reccl/common/log.h"
#include "reccl/detector/netns.h"

namespace reccl::detector {

using nlohmann::json;

namespace {
enum : uint64_t { kListen = 1ull << 40, kSignal = 3ull << 40, kEvents = 4ull << 40 };

Status epollAdd(int ep, int fd, uint64_t tag) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) return Status::FromErrno(errno, "detectord: epoll_ctl");
  return Status::Ok();
}

// Names from clients and the kernel need not be UTF-8: replaced, never a throw.
std::string dumpText(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void logJson(const char* level, const json& fields) {
  json j = fields;
  j["ts_ns"] = monotonicNs();
  j["level"] = level;
  std::string line = dumpText(j) + "\n";
  (void)!write(STDOUT_FILENO, line.data(), line.size());
}

json sourcesJson(const DetectorStatus& st, bool reasons) {
  json sources = json::array();
  for (const auto& s : st.sources) {
    json j{{"name", s.name}, {"active", s.active}};
    if (reasons) j["reason"] = s.reason;
    sources.push_back(std::move(j));
  }
  return sources;
}

// epoll serves clients and signals; the descriptors a daemon with many clients and namespaces
// holds exceed the soft limit of 1024 kept for select() users.
void raiseFdLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
}
}  // namespace

Result<std::unique_ptr<DetectorDaemon>> DetectorDaemon::create(DaemonOptions opts) {
  RECCL_TRY(opts.limits.validate());
  std::unique_ptr<DetectorDaemon> d(new DetectorDaemon());
  d->opts_ = std::move(opts);
  // Signals first: a SIGTERM during BPF probing must still end in a clean exit.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  // A client that vanishes mid-send must not kill the daemon (sends use MSG_NOSIGNAL; civetweb's
  // do not).
  signal(SIGPIPE, SIG_IGN);
  d->signalFd_.reset(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!d->signalFd_) return Status::FromErrno(errno, "detectord: signalfd");
  d->epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!d->epoll_) return Status::FromErrno(errno, "detectord: epoll_create1");
  raiseFdLimit();

  RECCL_ASSIGN_OR_RETURN(d->det_, Detector::create(d->opts_.detector));
  for (const auto& w : d->det_->watched()) d->fixedWatches_.insert(w.key);
  Detector* det = d->det_.get();
  d->metrics_ = std::make_unique<DaemonMetrics>([det] { return det->status(); });
  DaemonMetrics* m = d->metrics_.get();
  d->det_->setSignalObserver([m](const LinkSignal& s, uint64_t) { m->onSignal(s); });
  RECCL_TRY(d->setupSocket());
  if (d->opts_.metrics) {
    RECCL_ASSIGN_OR_RETURN(d->server_, MetricsServer::start(d->opts_.metricsServer, *d->metrics_));
  }
  RECCL_TRY(epollAdd(d->epoll_.get(), d->signalFd_.get(), kSignal));
  RECCL_TRY(epollAdd(d->epoll_.get(), d->det_->eventFd(), kEvents));
  RECCL_TRY(d->det_->start());
  auto st = d->det_->status();
  logJson("info", {{"msg", "started"}, {"socket", d->opts_.socketPath}, {"metrics_port", d->metricsPort()},
                   {"metrics_addr", d->opts_.metrics ? d->opts_.metricsServer.address : ""}, {"mode", st.mode},
                   {"sources", sourcesJson(st, true)}});
  return d;
}

DetectorDaemon::~DetectorDaemon() {
  server_.reset();  // its threads read det_ and metrics_
  clients_.clear();
  if (det_) det_->stop();
  det_.reset();  // detaches and unloads every BPF program
  if (socketCreated_) unlink(opts_.socketPath.c_str());
  if (!dirCreated_.empty()) rmdir(dirCreated_.c_str());  // fails, as it should, when something else is in it
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
    if (mkdir(dir.c_str(), 0755) == 0)
      dirCreated_ = dir;  // removed again at exit when empty
    else if (errno != EEXIST)
      return Status::FromErrno(errno, "detectord: mkdir " + dir);
  }
  // A socket file left by a crashed daemon is replaced, and nothing else: the daemon runs as
  // root, and a mistyped --socket must not delete a file, nor a socket someone serves.
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return Status(Errc::kInvalidArgument, "socket: " + path + " exists and is not a socket; not replacing it");
    // Non-blocking: a live daemon whose backlog is full (it paused accepting) answers EAGAIN
    // instead of holding this start up.
    UniqueFd probe(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!probe) return Status::FromErrno(errno, "detectord: socket");
    if (connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 || errno == EAGAIN)
      return Status(Errc::kExists, "detectord: another daemon serves " + path);
    if (errno != ECONNREFUSED)  // EPROTOTYPE: a socket of another kind, in use
      return Status::FromErrno(errno, "detectord: " + path + " is a socket that is not a stale daemon's; not replacing it");
    if (unlink(path.c_str()) != 0) return Status::FromErrno(errno, "detectord: remove the stale socket " + path);
  } else if (errno != ENOENT) {
    return Status::FromErrno(errno, "detectord: stat " + path);
  }
  listen_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listen_) return Status::FromErrno(errno, "detectord: socket");
  mode_t old = umask(0177);
  int rc = bind(listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  umask(old);
  if (rc != 0) return Status::FromErrno(errno, "detectord: bind " + path);
  socketCreated_ = true;
  if (!opts_.group.empty()) {
    // Run with that group as the primary one (the unit's Group=) and the socket has it already;
    // otherwise changing it needs membership or CAP_CHOWN.
    if (getegid() != gid && chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0)
      return Status::FromErrno(errno, "detectord: chgrp " + path + " to " + opts_.group +
                                          " (run with that group, e.g. the unit's Group=)");
    if (chmod(path.c_str(), 0660) != 0) return Status::FromErrno(errno, "detectord: chmod " + path);
  }
  if (listen(listen_.get(), 64) != 0) return Status::FromErrno(errno, "detectord: listen");
  return epollAdd(epoll_.get(), listen_.get(), kListen);
}

void DetectorDaemon::pauseAccepting(bool pause) {
  if (pause == acceptPaused_) return;
  acceptPaused_ = pause;
  if (pause) {
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, listen_.get(), nullptr);
    logJson("warn", {{"msg", "out of descriptors: not accepting until a client leaves"}});
  } else {
    (void)epollAdd(epoll_.get(), listen_.get(), kListen);
  }
}

void DetectorDaemon::acceptClients() {
  for (int i = 0; i < 64; ++i) {  // the rest on the next turn: the loop stays fair
    int fd = accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) pauseAccepting(true);
      return;
    }
    Client c;
    c.sock.reset(fd);
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) continue;
    c.pid = cred.pid;
    c.uid = cred.uid;
    const char* refuse = nullptr;
    if (static_cast<int>(clients_.size()) >= opts_.limits.maxClients)
      refuse = "total";
    else if (auto pu = clientsPerUid_.find(c.uid); pu != clientsPerUid_.end() && pu->second >= opts_.limits.maxClientsPerUid)
      refuse = "per_uid";
    if (refuse) {
      metrics_->onClientRefused(refuse);
      // One line per second at most: a connection flood must not become a log flood.
      ++refusalsSinceLog_;
      uint64_t now = monotonicNs();
      if (now - lastRefusalLogNs_ >= 1'000'000'000ull) {
        logJson("warn", {{"msg", "connection refused"}, {"reason", refuse}, {"uid", c.uid}, {"pid", c.pid},
                         {"refused_since_last_line", refusalsSinceLog_}});
        lastRefusalLogNs_ = now;
        refusalsSinceLog_ = 0;
      }
      continue;
    }
    // Pending output per client: a client that does not read fills this and is dropped.
    int sndbuf = opts_.limits.sendBufferBytes;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    if (!epollAdd(epoll_.get(), fd, static_cast<uint64_t>(fd)).ok()) continue;
    c.budget = RequestBudget(opts_.limits.requestsPerSec, opts_.limits.requestBurst, monotonicNs());
    clientsPerUid_[c.uid]++;
    logJson("info", {{"msg", "client connected"}, {"pid", c.pid}, {"uid", c.uid}});
    clients_.emplace(fd, std::move(c));
    metrics_->setClients(static_cast<int>(clients_.size()));
  }
}

void DetectorDaemon::dropClient(int fd, const char* reason, const std::string& detail) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  logJson("info", {{"msg", "client gone"}, {"pid", it->second.pid}, {"uid", it->second.uid}, {"why", detail}});
  if (std::strcmp(reason, "closed") != 0) metrics_->onClientDropped(reason);
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  if (--clientsPerUid_[it->second.uid] <= 0) clientsPerUid_.erase(it->second.uid);
  std::set<LinkKey> watches = std::move(it->second.watches);
  clients_.erase(it);
  metrics_->setClients(static_cast<int>(clients_.size()));
  pauseAccepting(false);
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
  // At most requestsPerWakeup requests, then the other clients get their turn (epoll is
  // level-triggered: the rest is read on the next one).
  for (int i = 0; i < opts_.limits.requestsPerWakeup; ++i) {
    auto it = clients_.find(fd);
    if (it == clients_.end()) return;
    Client& c = it->second;
    UniqueFd passed;
    auto msg = recvMessage(fd, &passed, kDaemonMaxRequest);
    if (!msg.ok()) {
      if (msg.status().code() == Errc::kTimeout) return;
      const char* reason = msg.status().code() == Errc::kAborted    ? "closed"
                           : msg.status().code() == Errc::kProtocol ? "malformed"
                                                                    : "error";
      dropClient(fd, reason, msg.status().message());
      return;
    }
    if (!c.budget.take(monotonicNs())) {
      dropClient(fd, "over_rate", "more than " + std::to_string(static_cast<int>(opts_.limits.requestsPerSec)) +
                                      " requests per second");
      return;
    }
    std::optional<DaemonOp> op;
    auto req = decodeRequest(msg.value(), &op);
    if (!req.ok()) {
      // A request with a bad value is answered in its op's name, so the client matches the
      // refusal to its request. One that was no request at all is answered as "error" (an error
      // in the name of a ping could pass for its pong), and its client dropped.
      const bool drop = req.status().code() == Errc::kProtocol;
      reply(c, dumpText({{"op", op && !drop ? daemonOpName(*op) : "error"}, {"version", kDaemonProtocolVersion},
                         {"ok", false}, {"error", req.status().message()}}));
      if (drop) {
        if (clients_.count(fd)) dropClient(fd, "malformed", req.status().message());
        return;
      }
      continue;
    }
    handleRequest(c, req.value(), std::move(passed));
  }
}

void DetectorDaemon::reply(Client& c, const std::string& text, int fd) {
  if (Status st = sendMessage(c.sock.get(), text, fd); !st.ok()) dropClient(c.sock.get(), "not_reading", st.message());
}

std::string DetectorDaemon::watchReply(Client& c, const DaemonRequest& req, UniqueFd nsFd) {
  json r{{"op", "watch"}, {"version", kDaemonProtocolVersion}};
  auto refuse = [&](const std::string& why) {
    r.update({{"ok", false}, {"error", why}});
    return dumpText(r);
  };
  // The daemon opens no path a client names: the namespace comes as a descriptor the client
  // opened with its own rights. A path alone is refused the same way whatever it names.
  if (!nsFd) return refuse("watch: pass the namespace as an open descriptor with the request (SCM_RIGHTS)");
  if (c.watches.size() >= opts_.limits.maxWatches)
    return refuse("watch: this client watches " + std::to_string(c.watches.size()) + " links, the most allowed");
  auto ns = netnsFromFd(std::move(nsFd), req.watch.netns);
  if (!ns.ok()) return refuse(ns.status().message());
  auto w = det_->addWatch(req.watch, std::move(ns).value());
  if (!w.ok()) return refuse(w.status().message());
  c.watches.insert(w->key);
  r.update({{"ok", true}, {"slot", w->slot}, {"netns_ino", w->key.netnsIno}, {"ifindex", w->key.ifindex},
            {"ifname", w->ifname}});
  return dumpText(r);
}

void DetectorDaemon::handleRequest(Client& c, const DaemonRequest& req, UniqueFd nsFd) {
  json r{{"op", daemonOpName(req.op)}, {"version", kDaemonProtocolVersion}};
  switch (req.op) {
    case DaemonOp::kHello: {
      auto st = det_->status();
      r["mode"] = st.mode;
      r["sources"] = sourcesJson(st, false);
      break;
    }
    case DaemonOp::kWatch:
      reply(c, watchReply(c, req, std::move(nsFd)));
      return;
    case DaemonOp::kUnwatch: {
      bool had = c.watches.erase(req.link) > 0;
      r["ok"] = had;
      if (!had) r["error"] = "link not watched by this client";
      if (had) releaseWatch(req.link);
      break;
    }
    case DaemonOp::kPing:
      // Liveness: answered from the same loop that delivers events, so a pong proves both work.
      r["seq"] = req.seq;
      break;
    case DaemonOp::kStatus:
      reply(c, statusToJson(det_->status(), static_cast<int>(clients_.size())));
      return;
    case DaemonOp::kMap: {
      auto mfd = det_->linkStateShareFd();
      if (mfd.ok()) {
        r.update({{"ok", true}, {"slots", RECCL_LINK_MAX_SLOTS}, {"slot_size", sizeof(reccl_link_slot)}});
        reply(c, dumpText(r), mfd->get());
        return;
      }
      r.update({{"ok", false}, {"error", mfd.status().message()}});
      break;
    }
  }
  reply(c, dumpText(r));
}

void DetectorDaemon::deliverEvents() {
  uint64_t now = monotonicNs();
  for (const auto& e : det_->drain()) {
    metrics_->onEvent(e, now);
    std::string msg = eventToJson(e);
    logJson("info", json::parse(msg, nullptr, false));
    std::vector<int> failed;
    for (auto& [fd, c] : clients_) {
      if (!c.watches.count(e.link)) continue;
      // A client that stops reading fills its socket buffer; it is dropped rather than
      // allowed to stall every other client.
      if (!sendMessage(fd, msg).ok()) failed.push_back(fd);
    }
    for (int fd : failed) dropClient(fd, "not_reading", "not reading events");
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
        acceptClients();
      } else if (t == kEvents) {
        deliverEvents();
      } else {
        onClient(static_cast<int>(t));
      }
    }
  }
}

}  // namespace reccl::detector
