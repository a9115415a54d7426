#include "reccl/testbed/tap_forwarder.h"

#include <linux/close_range.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "reccl/common/deadline.h"

namespace reccl::testbed {

uint64_t processStartTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  // Field 2 (comm) may hold spaces; count fields after its closing parenthesis.
  auto rp = line.rfind(')');
  if (rp == std::string::npos) return 0;
  std::istringstream rest(line.substr(rp + 2));
  std::string field;
  char state = '?';
  rest >> state;
  if (state == 'Z' || state == 'X') return 0;  // exited, only not reaped yet
  // Fields 3..22; starttime is field 22.
  for (int i = 4; i <= 22; ++i) {
    if (!(rest >> field)) return 0;
  }
  return std::stoull(field);
}

namespace {

volatile sig_atomic_t gStop = 0;
void onTerm(int) { gStop = 1; }

// Runs in the forked child: no allocation in the loop, only syscalls.
[[noreturn]] void forwardLoop(const std::vector<int>& fds) {
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) ::_exit(1);
  // fds come in (host, fabric) pairs; each fd's data.u32 is its index, its partner is idx ^ 1.
  for (size_t i = 0; i < fds.size(); ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    if (::epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) != 0) ::_exit(1);
  }
  static char frame[65536 + 64];
  epoll_event evs[64];
  while (!gStop) {
    int n = ::epoll_wait(ep, evs, 64, 1000);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::_exit(1);
    }
    for (int e = 0; e < n; ++e) {
      const uint32_t idx = evs[e].data.u32;
      if (evs[e].events & (EPOLLERR | EPOLLHUP)) ::_exit(0);  // a tap was deleted: testbed gone
      const int from = fds[idx];
      const int to = fds[idx ^ 1u];
      // Drain what is queued; a frame that cannot be delivered (port down) is dropped, as a
      // cable would.
      for (int burst = 0; burst < 256; ++burst) {
        ssize_t r = ::read(from, frame, sizeof(frame));
        if (r < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN) break;
          if (errno == EBADFD) ::_exit(0);
          break;
        }
        if (r == 0) break;
        (void)!::write(to, frame, static_cast<size_t>(r));
      }
    }
  }
  ::_exit(0);
}

// `keep` is sorted. close_range: no allocation between fork and the loop.
void closeAllExcept(const std::vector<int>& keep) {
  unsigned from = 3;
  for (int k : keep) {
    if (static_cast<unsigned>(k) > from) ::close_range(from, static_cast<unsigned>(k) - 1, 0);
    from = static_cast<unsigned>(k) + 1;
  }
  ::close_range(from, ~0u, 0);
}

}  // namespace

Result<ForwarderHandle> startForwarder(std::vector<TapPair> pairs) {
  std::vector<int> fds;
  for (const TapPair& p : pairs) {
    fds.push_back(p.host.get());
    fds.push_back(p.fabric.get());
  }
  std::vector<int> keep = fds;
  std::sort(keep.begin(), keep.end());
  // Hand the pid of the grandchild back over a pipe; the middle child exits at once, so the
  // forwarder is re-parented to init and never becomes the caller's zombie.
  int pp[2];
  if (::pipe2(pp, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe2 for forwarder");
  UniqueFd pr(pp[0]), pw(pp[1]);
  pid_t mid = ::fork();
  if (mid < 0) return Status::FromErrno(errno, "fork forwarder");
  if (mid == 0) {
    ::setsid();
    pid_t fwd = ::fork();
    if (fwd != 0) {
      (void)!::write(pw.get(), &fwd, sizeof(fwd));
      ::_exit(fwd < 0 ? 1 : 0);
    }
    // The forwarder must hold nothing else: a test's guard pipe or a caller's socket left open
    // here would outlive them.
    closeAllExcept(keep);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      if (devnull > 2) ::close(devnull);
    }
    ::prctl(PR_SET_NAME, "reccl-tapfwd");
    struct sigaction sa{};
    sa.sa_handler = onTerm;
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
    ::signal(SIGHUP, SIG_IGN);
    ::signal(SIGPIPE, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    forwardLoop(fds);
  }
  pw.reset();
  int ws = 0;
  while (::waitpid(mid, &ws, 0) < 0 && errno == EINTR) {
  }
  pid_t fwd = -1;
  ssize_t n = ::read(pr.get(), &fwd, sizeof(fwd));
  if (n != static_cast<ssize_t>(sizeof(fwd)) || fwd <= 0) {
    return Status{Errc::kSystem, "forwarder did not start"};
  }
  // pairs (the parent's copies of the queues) close here; the forwarder holds its own.
  return ForwarderHandle{fwd, processStartTicks(fwd)};
}

Status stopForwarder(pid_t pid, uint64_t startTicks) {
  if (pid <= 0 || processStartTicks(pid) != startTicks) return Status::Ok();
  if (::kill(pid, SIGTERM) != 0) {
    return errno == ESRCH ? Status::Ok() : Status::FromErrno(errno, "kill forwarder");
  }
  Deadline dl = Deadline::afterMs(2000);
  while (!dl.expired()) {
    if (processStartTicks(pid) != startTicks) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(pid, SIGKILL);
  Deadline dl2 = Deadline::afterMs(2000);
  while (!dl2.expired()) {
    if (processStartTicks(pid) != startTicks) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return {Errc::kTimeout, "forwarder pid " + std::to_string(pid) + " did not exit"};
}

}  // namespace reccl::testbed
