// reccl-detectord as a child process for the daemon tests, and the raw pieces of a client: a
// socket that sends exactly the bytes (and descriptor) a test wants, pings timed from send to
// pong, HTTP requests to /metrics.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "reccl/common/deadline.h"
#include "reccl/common/unique_fd.h"
#include "reccl/detector/daemon_protocol.h"

namespace reccl::detector::testing {

struct DaemonLaunch {
  std::vector<std::string> prefix;  // run through this (e.g. setpriv ...), the daemon's argv after it
  uid_t dirOwner = 0;               // owner of the directory holding the socket
};

class DaemonProcess {
 public:
  explicit DaemonProcess(std::vector<std::string> extra, DaemonLaunch launch = {}) {
    static int n = 0;
    dir_ = "/tmp/rdt-" + std::to_string(getpid()) + "-" + std::to_string(n++);
    mkdir(dir_.c_str(), 0755);
    if (launch.dirOwner != 0) (void)!chown(dir_.c_str(), launch.dirOwner, static_cast<gid_t>(-1));
    sock_ = dir_ + "/d.sock";
    log_ = dir_ + ".log";
    std::vector<std::string> args = launch.prefix;
    for (const auto& a : {std::string(RECCL_DETECTORD_PATH), std::string("--socket"), sock_}) args.push_back(a);
    if (std::find(extra.begin(), extra.end(), "--metrics-port") == extra.end())
      for (const auto& a : {"--metrics-port", "0"}) args.push_back(a);  // any free port
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
  }
  ~DaemonProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    unlink(sock_.c_str());
    rmdir(dir_.c_str());
    unlink(log_.c_str());
  }
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // Waits for the "started" log line; returns the metrics port (0 on failure, -1 when off).
  int waitStarted(int ms) {
    Deadline dl = Deadline::afterMs(ms);
    while (!dl.expired()) {
      auto j = startedLine();
      if (j.is_object()) return j.value("metrics_port", 0);
      if (reaped(WNOHANG)) return 0;
      usleep(20000);
    }
    return 0;
  }
  // The daemon's "started" log record (null until it is written).
  nlohmann::json startedLine() const {
    std::istringstream in(logText());
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("msg", "") == "started") return j;
    }
    return nullptr;
  }
  std::string logText() const {
    std::ifstream f(log_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  // SIGTERM and wait; the exit status (also of a daemon that exited by itself), or -1 when it
  // did not exit in time.
  int terminate(int ms) {
    if (pid_ > 0) kill(pid_, SIGTERM);
    Deadline dl = Deadline::afterMs(ms);
    while (pid_ > 0 && !dl.expired()) {
      if (reaped(WNOHANG)) break;
      usleep(10000);
    }
    return pid_ > 0 ? -1 : exitStatus_;
  }
  pid_t pid() const { return pid_; }
  const std::string& socket() const { return sock_; }

 private:
  bool reaped(int flags) {
    int status = 0;
    if (pid_ <= 0 || waitpid(pid_, &status, flags) != pid_) return false;
    pid_ = -1;
    exitStatus_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }
  pid_t pid_ = -1;
  int exitStatus_ = -1;
  std::string dir_, sock_, log_;
};

// A connection that sends what the test says, byte for byte.
class RawClient {
 public:
  explicit RawClient(const std::string& path) {
    sock_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), std::min(path.size(), sizeof(a.sun_path) - 1));
    if (sock_ && ::connect(sock_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) sock_.reset();
  }
  bool ok() const { return sock_.valid(); }
  int fd() const { return sock_.get(); }
  bool send(const std::string& text, int passFd = -1) { return sendMessage(sock_.get(), text, passFd).ok(); }
  // The next message within ms; "" on timeout, "<closed>" when the daemon closed the connection.
  std::string recv(int ms) {
    pollfd p{sock_.get(), POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return "";
    auto m = recvMessage(sock_.get());
    if (!m.ok()) return "<closed>";
    return *m;
  }
  // Sends a ping and waits for its pong: the round trip in ms, or -1 when none came within ms.
  double ping(uint64_t seq, int ms) {
    uint64_t t0 = monotonicNs();
    if (!send(nlohmann::json{{"op", "ping"}, {"seq", seq}}.dump())) return -1;
    Deadline dl = Deadline::afterMs(ms);
    while (!dl.expired()) {
      auto j = nlohmann::json::parse(recv(dl.remainingMsForPoll()), nullptr, false);
      if (j.is_object() && j.value("op", "") == "ping" && j.value("seq", uint64_t(0)) == seq)
        return static_cast<double>(monotonicNs() - t0) / 1e6;
    }
    return -1;
  }

 private:
  UniqueFd sock_;
};

// Round trips of pings sent every `everyMs` for `ms`; a ping with no pong within its own
// deadline counts as `pongDeadlineMs` and ends the series.
inline std::vector<double> pingSeries(RawClient& c, int ms, int everyMs = 5, int pongDeadlineMs = 2000) {
  std::vector<double> rtt;
  Deadline dl = Deadline::afterMs(ms);
  for (uint64_t seq = 1; !dl.expired(); ++seq) {
    double r = c.ping(seq, pongDeadlineMs);
    if (r < 0) {
      rtt.push_back(pongDeadlineMs);
      break;
    }
    rtt.push_back(r);
    usleep(static_cast<useconds_t>(everyMs) * 1000);
  }
  return rtt;
}

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// One HTTP/1.0 request; the whole response ("" when no connection).
inline std::string httpRequest(int port, const std::string& method, const std::string& path,
                               const std::string& addr = "127.0.0.1") {
  bool v6 = addr.find(':') != std::string::npos;
  UniqueFd fd(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_storage ss{};
  socklen_t len;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET6, addr.c_str(), &a->sin6_addr);
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, addr.c_str(), &a->sin_addr);
    len = sizeof(*a);
  }
  timeval tv{5, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) return out;
  std::string req = method + " " + path + " HTTP/1.0\r\n\r\n";
  (void)!write(fd.get(), req.data(), req.size());
  char buf[4096];
  ssize_t n;
  while ((n = read(fd.get(), buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

inline std::string httpGet(int port, const std::string& path) { return httpRequest(port, "GET", path); }

}  // namespace reccl::detector::testing
