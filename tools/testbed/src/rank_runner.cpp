#include "reccl/testbed/rank_runner.h"

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include "reccl/common/blocked_signals.h"
#include "reccl/common/deadline.h"
#include "reccl/common/free_port.h"
#include "reccl/common/log.h"
#include "reccl/netlink/netns_guard.h"
#include "reccl/testbed/child_process.h"
#include "reccl/testbed/testbed.h"
#include "reccl/testbed/testbed_layout.h"

namespace reccl::testbed {

Result<int> freeTcpPort(const std::string& netns) {
  RECCL_ASSIGN_OR_RETURN(auto guard, netlink::NetnsGuard::enter(netns));
  // Two: a job may take the port after it for a second communicator.
  int port = freePortOutsideEphemeralRange(2);
  if (port < 0) return Status::FromErrno(-port, "a free port outside the ephemeral range in " + netns);
  return port;
}

namespace {

void writeAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// One output stream of one rank; complete lines go out prefixed, so lines of different ranks
// never interleave mid-line.
struct Stream {
  int fd = -1;  // read end, -1 at EOF
  UniqueFd owner;
  int outFd = STDOUT_FILENO;
  std::string prefix;
  std::string pending;

  void feed(const char* data, size_t n) {
    pending.append(data, n);
    size_t start = 0;
    std::string outBuf;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      outBuf += prefix;
      outBuf.append(pending, start, nl + 1 - start);
    }
    pending.erase(0, start);
    if (pending.size() > 65536) {  // a very long line without newline: flush as is
      outBuf += prefix + pending + "\n";
      pending.clear();
    }
    if (!outBuf.empty()) writeAll(outFd, outBuf);
  }
  void close() {
    if (!pending.empty()) writeAll(outFd, prefix + pending + "\n");
    pending.clear();
    fd = -1;
    owner.reset();
  }
};

struct Rank {
  pid_t pid = -1;
  bool running = false;
  int exitCode = 0;
};

}  // namespace

Result<int> runRanks(const RunOptions& o) {
  if (o.ranksPerHost < 1 || o.ranksPerHost > 256) {
    return Status{Errc::kInvalidArgument,
                  "--ranks-per-host " + std::to_string(o.ranksPerHost) + " out of range [1, 256]"};
  }
  if (o.argv.empty()) return Status{Errc::kInvalidArgument, "no command given after --"};
  if (o.timeoutSec < 0) return Status{Errc::kInvalidArgument, "--timeout must be >= 0"};
  if (o.masterPort < 0 || o.masterPort > 65535) {
    return Status{Errc::kInvalidArgument, "--port " + std::to_string(o.masterPort) + " out of range"};
  }
  RECCL_TRY(requireRoot());
  RECCL_ASSIGN_OR_RETURN(TestbedState st, Testbed::load(o.name));
  int port = o.masterPort;
  if (port == 0) {
    RECCL_ASSIGN_OR_RETURN(port, freeTcpPort(st.hosts.at(0).netns));
  }
  const int world = st.spec.hosts * o.ranksPerHost;

  // The signals the runner turns into events (forwarded to the ranks, a rank's exit).
  BlockedSignals sigs{SIGINT, SIGTERM, SIGCHLD};
  if (sigs.fd() < 0) return Status::FromErrno(errno, "signalfd");
  std::vector<Rank> ranks(static_cast<size_t>(world));
  std::vector<Stream> streams;
  streams.reserve(static_cast<size_t>(world) * 2);

  auto killAll = [&](int sig) {
    for (const Rank& r : ranks) {
      if (r.running) ::kill(-r.pid, sig);
    }
  };

  for (int rank = 0; rank < world; ++rank) {
    const int host = rank / o.ranksPerHost;
    SpawnOptions so;
    so.netns = st.hosts[static_cast<size_t>(host)].netns;
    so.argv = o.argv;
    so.captureStdout = true;
    so.captureStderr = true;
    so.newProcessGroup = true;
    // "Ranks die with the runner": the rank's children too, even when the runner is SIGKILLed.
    so.groupDiesWithParent = true;
    so.env = o.env;
    so.env.push_back("RANK=" + std::to_string(rank));
    so.env.push_back("WORLD_SIZE=" + std::to_string(world));
    so.env.push_back("LOCAL_RANK=" + std::to_string(rank % o.ranksPerHost));
    so.env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(o.ranksPerHost));
    so.env.push_back("GROUP_RANK=" + std::to_string(host));
    so.env.push_back("MASTER_ADDR=" + mgmtAddress(0));
    so.env.push_back("MASTER_PORT=" + std::to_string(port));
    so.env.push_back("RECCL_TESTBED=" + o.name);
    auto cp = spawn(so);
    if (!cp.ok()) {
      killAll(SIGKILL);
      for (Rank& r : ranks) {
        if (r.running) ::waitpid(r.pid, nullptr, 0);
      }
      return cp.status().Wrap("rank " + std::to_string(rank));
    }
    ranks[static_cast<size_t>(rank)] = {cp->pid, true, 0};
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    Stream so1;
    so1.fd = cp->stdoutFd.get();
    so1.owner = std::move(cp->stdoutFd);
    so1.outFd = STDOUT_FILENO;
    so1.prefix = prefix;
    streams.push_back(std::move(so1));
    Stream se;
    se.fd = cp->stderrFd.get();
    se.owner = std::move(cp->stderrFd);
    se.outFd = STDERR_FILENO;
    se.prefix = prefix;
    streams.push_back(std::move(se));
  }
  RECCL_INFO(kLogTestbed, "run: %d ranks on testbed %s, master %s:%d", world, o.name.c_str(),
             mgmtAddress(0).c_str(), port);

  std::optional<int> firstFailure;
  int interruptedBy = 0;
  bool timedOut = false;
  Deadline runDeadline = o.timeoutSec > 0 ? Deadline::after(std::chrono::seconds(o.timeoutSec))
                                          : Deadline::never();
  std::optional<Deadline> killDeadline;   // after a forwarded signal: SIGKILL when it passes
  std::optional<Deadline> drainDeadline;  // after the last rank: stop waiting for output
  int running = world;
  char buf[16384];

  auto reap = [&] {
    for (Rank& r : ranks) {
      if (!r.running) continue;
      int ws = 0;
      pid_t p = ::waitpid(r.pid, &ws, WNOHANG);
      if (p == r.pid) {
        r.running = false;
        r.exitCode = exitCodeOf(ws);
        --running;
        // Descendants the rank left behind in its group are not kept alive.
        ::kill(-r.pid, SIGKILL);
        if (r.exitCode != 0 && !firstFailure) firstFailure = r.exitCode;
      }
    }
  };

  for (;;) {
    reap();
    bool anyOpen = false;
    for (const Stream& s : streams) anyOpen |= s.fd >= 0;
    if (running == 0 && !anyOpen) break;
    if (running == 0 && !drainDeadline) drainDeadline = Deadline::afterMs(1000);
    if (drainDeadline && drainDeadline->expired()) break;

    std::vector<pollfd> pfds;
    std::vector<Stream*> owners;
    pfds.push_back({sigs.fd(), POLLIN, 0});
    owners.push_back(nullptr);
    for (Stream& s : streams) {
      if (s.fd >= 0) {
        pfds.push_back({s.fd, POLLIN, 0});
        owners.push_back(&s);
      }
    }
    int waitMs = 200;  // SIGCHLD is the main wake-up; this only bounds the deadline checks
    if (!timedOut && !runDeadline.expired()) {
      int left = runDeadline.remainingMsForPoll();
      if (left >= 0 && left < waitMs) waitMs = left;
    }
    int pr = ::poll(pfds.data(), pfds.size(), waitMs);
    if (pr < 0 && errno != EINTR) return Status::FromErrno(errno, "poll rank output");
    if (pr > 0) {
      for (size_t i = 0; i < pfds.size(); ++i) {
        if (pfds[i].revents == 0) continue;
        if (owners[i] == nullptr) {
          for (int sig = sigs.next(); sig != 0; sig = sigs.next()) {
            if (sig == SIGINT || sig == SIGTERM) {
              if (interruptedBy == 0) interruptedBy = sig;
              killAll(sig);
              if (!killDeadline) killDeadline = Deadline::afterMs(5000);
            }
          }
          continue;
        }
        ssize_t n = ::read(pfds[i].fd, buf, sizeof(buf));
        if (n > 0) owners[i]->feed(buf, static_cast<size_t>(n));
        else if (n == 0 || (errno != EINTR && errno != EAGAIN)) owners[i]->close();
      }
    }
    if (!timedOut && runDeadline.expired() && running > 0) {
      timedOut = true;
      std::string msg = "reccl testbed run: timeout after " + std::to_string(o.timeoutSec) +
                        " s, killing " + std::to_string(running) + " rank(s)\n";
      writeAll(STDERR_FILENO, msg);
      killAll(SIGKILL);
    }
    if (killDeadline && killDeadline->expired() && running > 0) killAll(SIGKILL);
  }
  for (Stream& s : streams) {
    if (s.fd >= 0) s.close();
  }
  if (timedOut) return kRunTimeoutExit;
  if (interruptedBy != 0) return 128 + interruptedBy;
  return firstFailure.value_or(0);
}

}  // namespace reccl::testbed
