#include "testbed_fixture.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace reccl::test {

std::string testbedSkipReason() {
  if (::geteuid() != 0) return "needs root: the testbed creates network namespaces and devices";
  if (::access("/proc/self/ns/net", R_OK) != 0) return "no network namespace support (/proc/self/ns/net)";
  return "";
}

std::string uniqueTestbedName() {
  static std::atomic<int> counter{0};
  auto base36 = [](unsigned long v) {
    const char* digits = "0123456789abcdefghijklmnopqrstuvwxyz";
    std::string s;
    do {
      s.insert(s.begin(), digits[v % 36]);
      v /= 36;
    } while (v != 0);
    return s;
  };
  return "t" + base36(static_cast<unsigned long>(::getpid())) + "-" +
         base36(static_cast<unsigned long>(counter++));
}

int startTeardownGuard(const std::string& name, int* guardPid) {
  return startExitGuard([name] { (void)testbed::Testbed::down(name); }, guardPid);
}

int startExitGuard(const std::function<void()>& atEnd, int* guardPid) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    // Own session: a Ctrl-C or a group kill aimed at the test must not take the guard along.
    ::setsid();
    ::signal(SIGINT, SIG_IGN);
    ::signal(SIGTERM, SIG_IGN);
    ::signal(SIGHUP, SIG_IGN);
    // Keep only the read end, so that EOF means the test process is gone or done.
    const int r = fds[0];
    if (r > 3) ::close_range(3, static_cast<unsigned>(r) - 1, 0);
    ::close_range(static_cast<unsigned>(r) + 1, ~0u, 0);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      if (devnull > 2) ::close(devnull);
    }
    char c;
    while (::read(r, &c, 1) < 0 && errno == EINTR) {
    }
    atEnd();
    ::_exit(0);
  }
  ::close(fds[0]);
  *guardPid = pid;
  return fds[1];
}

Result<std::unique_ptr<ScopedTestbed>> ScopedTestbed::create(TestbedSpec spec) {
  if (spec.name.empty()) spec.name = uniqueTestbedName();
  std::unique_ptr<ScopedTestbed> tb(new ScopedTestbed());
  tb->state_.spec = spec;
  // The guard exists before anything is created, so a crash in the middle of up is covered.
  tb->guardWriteFd_ = startTeardownGuard(spec.name, &tb->guardPid_);
  auto st = testbed::Testbed::up(spec);
  if (!st.ok() && st.status().code() == Errc::kExists) {
    (void)testbed::Testbed::down(spec.name);
    st = testbed::Testbed::up(spec);
  }
  if (!st.ok()) return st.status();
  tb->state_ = std::move(*st);
  return tb;
}

ScopedTestbed::~ScopedTestbed() {
  auto rep = testbed::Testbed::down(state_.spec.name);
  if (rep.ok()) {
    for (const std::string& e : rep->errors) std::fprintf(stderr, "testbed down: %s\n", e.c_str());
  }
  if (guardWriteFd_ >= 0) ::close(guardWriteFd_);
  if (guardPid_ > 0) {
    int ws;
    while (::waitpid(guardPid_, &ws, 0) < 0 && errno == EINTR) {
    }
  }
}

const std::string& ScopedTestbed::netns(int host) const {
  return state_.hosts.at(static_cast<size_t>(host)).netns;
}

CapturedRun ScopedTestbed::run(int host, const std::vector<std::string>& argv,
                               std::chrono::milliseconds timeout) const {
  auto r = testbed::runCaptured(netns(host), argv, timeout);
  if (r.ok()) return *r;
  CapturedRun failed;
  failed.exitCode = -1;
  failed.err = r.status().ToString();
  return failed;
}

CapturedRun ScopedTestbed::shell(int host, const std::string& script,
                                 std::chrono::milliseconds timeout) const {
  return run(host, {"sh", "-c", script}, timeout);
}

bool ScopedTestbed::ping(int from, int to, int rail, int payload, int waitSec) const {
  const std::string dst = rail < 0 ? testbed::mgmtAddress(to) : testbed::railAddress(to, rail);
  auto r = run(from, {"ping", "-n", "-q", "-c", "1", "-W", std::to_string(waitSec), "-M", "do",
                      "-s", std::to_string(payload), dst},
               std::chrono::seconds(waitSec + 5));
  return r.exitCode == 0;
}

}  // namespace reccl::test
