#include "reccl/testbed/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "reccl/common/deadline.h"
#include "reccl/netlink/netns.h"

extern char** environ;

namespace reccl::testbed {

int exitCodeOf(int waitStatus) noexcept {
  if (WIFEXITED(waitStatus)) return WEXITSTATUS(waitStatus);
  if (WIFSIGNALED(waitStatus)) return 128 + WTERMSIG(waitStatus);
  return 1;
}

namespace {

struct Pipe {
  UniqueFd r, w;
};

Result<Pipe> makePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe2");
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// Child side after fork: only async-signal-safe calls until exec. Failures are reported as
// (stage, errno) through the error pipe, which exec closes on success.
struct ChildError {
  int stage;
  int err;
};
const char* stageName(int stage) {
  switch (stage) {
    case 1: return "setns";
    case 2: return "dup2";
    case 3: return "exec";
    case 4: return "fork";
    default: return "child setup";
  }
}

[[noreturn]] void childFail(int errFd, int stage) {
  ChildError e{stage, errno};
  (void)!::write(errFd, &e, sizeof(e));
  ::_exit(127);
}

// The supervisor's death signal: catchable (SIGKILL would end it before it could kill its group)
// and not one the runner forwards to ranks; any wake-up checks whether the caller is gone.
constexpr int kSupervisorDeathSignal = SIGUSR1;

// Child side, after the namespace and stdio are set up. Returns in the command's process (which
// then execs); the supervisor never returns. Only async-signal-safe calls.
void superviseGroup(int errFd, pid_t caller) {
  sigset_t waitFor, all;
  sigemptyset(&waitFor);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, kSupervisorDeathSignal}) sigaddset(&waitFor, sig);
  // Every signal blocked: one the supervisor does not wait for (USR2, ALRM) must not end it and
  // leave the command's children behind; the command unblocks them.
  sigfillset(&all);
  ::sigprocmask(SIG_BLOCK, &all, nullptr);
  ::signal(SIGCHLD, SIG_DFL);  // a caller's SIG_IGN would reap the command before waitpid
  ::prctl(PR_SET_PDEATHSIG, kSupervisorDeathSignal);
  if (::getppid() != caller) ::_exit(127);
  const pid_t supervisor = ::getpid();
  // _Fork: no atfork handlers, which may take locks another thread of the caller held at the
  // first fork.
  const pid_t command = ::_Fork();
  if (command < 0) childFail(errFd, 4);
  if (command == 0) {
    // Should the supervisor alone be killed, the command goes too.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != supervisor) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    return;
  }
  // The caller learns of the exec (or its failure) from the command's copy of the pipe alone,
  // and the command's output ends when the command's does. The supervisor never execs, so it
  // closes every descriptor it inherited (close-on-exec ones included: another spawn's pipes,
  // the caller's sockets), or it would hold them open for the rank's whole life.
  ::close(STDOUT_FILENO);
  ::close(STDERR_FILENO);
  ::close_range(3, ~0U, 0);
  for (;;) {
    siginfo_t si{};
    int sig = ::sigwaitinfo(&waitFor, &si);
    if (::getppid() != caller) {
      ::kill(0, SIGKILL);  // the whole group, this process included
      ::_exit(128 + SIGKILL);
    }
    if (sig != SIGCHLD) continue;  // a signal to the group reached the command as well
    int ws = 0;
    if (::waitpid(command, &ws, WNOHANG) == command) ::_exit(exitCodeOf(ws));
  }
}

}  // namespace

Result<ChildProcess> spawn(const SpawnOptions& opts) {
  if (opts.argv.empty()) return Status{Errc::kInvalidArgument, "command is empty"};
  UniqueFd nsFd;
  if (!opts.netns.empty()) {
    RECCL_ASSIGN_OR_RETURN(nsFd, netlink::openNetns(opts.netns));
  }
  // Everything the child needs is built before fork: no allocation after it.
  std::map<std::string, std::string> envMap;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) envMap[kv.substr(0, eq)] = kv;
  }
  for (const std::string& kv : opts.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) return Status{Errc::kInvalidArgument, "env entry '" + kv + "' lacks '='"};
    envMap[kv.substr(0, eq)] = kv;
  }
  std::vector<std::string> envStore;
  for (auto& [k, v] : envMap) envStore.push_back(v);
  std::vector<char*> envp;
  for (std::string& s : envStore) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argStore = opts.argv;
  std::vector<char*> argv;
  for (std::string& s : argStore) argv.push_back(s.data());
  argv.push_back(nullptr);

  Pipe out, err;
  if (opts.captureStdout) { RECCL_ASSIGN_OR_RETURN(out, makePipe()); }
  if (opts.captureStderr) { RECCL_ASSIGN_OR_RETURN(err, makePipe()); }
  RECCL_ASSIGN_OR_RETURN(Pipe status, makePipe());
  const pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno(errno, "fork");
  if (pid == 0) {
    const int ef = status.w.get();
    if (opts.dieWithParent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
    }
    if (opts.newProcessGroup || opts.groupDiesWithParent) ::setpgid(0, 0);
    // The parent may ignore or block signals while it waits; the command starts clean.
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (nsFd.valid()) {
      if (::setns(nsFd.get(), CLONE_NEWNET) != 0) childFail(ef, 1);
      // As `ip netns exec`: a private mount namespace with /sys showing this host's devices.
      // Best effort; commands that never look at /sys work without it.
      if (::unshare(CLONE_NEWNS) == 0 &&
          ::mount("", "/", "none", MS_SLAVE | MS_REC, nullptr) == 0 &&
          ::umount2("/sys", MNT_DETACH) == 0) {
        ::mount("sysfs", "/sys", "sysfs", 0, nullptr);
      }
    }
    if (out.w.valid() && ::dup2(out.w.get(), STDOUT_FILENO) < 0) childFail(ef, 2);
    if (err.w.valid() && ::dup2(err.w.get(), STDERR_FILENO) < 0) childFail(ef, 2);
    if (opts.groupDiesWithParent) superviseGroup(ef, parent);
    ::execvpe(argv[0], argv.data(), envp.data());
    childFail(ef, 3);
  }
  status.w.reset();
  out.w.reset();
  err.w.reset();
  ChildError ce{};
  ssize_t n;
  do {
    n = ::read(status.r.get(), &ce, sizeof(ce));
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof(ce))) {
    int ws = 0;
    ::waitpid(pid, &ws, 0);
    std::string what = std::string(stageName(ce.stage)) + " " + opts.argv[0];
    if (!opts.netns.empty()) what += " in netns " + opts.netns;
    return Status::FromErrno(ce.err, what);
  }
  ChildProcess cp;
  cp.pid = pid;
  cp.stdoutFd = std::move(out.r);
  cp.stderrFd = std::move(err.r);
  return cp;
}

Result<CapturedRun> runCaptured(const std::string& netns, const std::vector<std::string>& argv,
                                std::chrono::milliseconds timeout) {
  SpawnOptions o;
  o.netns = netns;
  o.argv = argv;
  o.captureStdout = true;
  o.captureStderr = true;
  o.newProcessGroup = true;
  RECCL_ASSIGN_OR_RETURN(ChildProcess cp, spawn(o));
  CapturedRun run;
  Deadline dl = Deadline::after(timeout);
  std::string* sinks[2] = {&run.out, &run.err};
  pollfd pfds[2] = {{cp.stdoutFd.get(), POLLIN, 0}, {cp.stderrFd.get(), POLLIN, 0}};
  int open = 2;
  char buf[4096];
  while (open > 0) {
    int pr = ::poll(pfds, 2, dl.remainingMsForPoll());
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) {
      run.timedOut = true;
      ::kill(-cp.pid, SIGKILL);
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (pfds[i].fd < 0 || pfds[i].revents == 0) continue;
      ssize_t n = ::read(pfds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        pfds[i].fd = -1;
        --open;
      }
    }
  }
  int ws = 0;
  while (::waitpid(cp.pid, &ws, 0) < 0 && errno == EINTR) {
  }
  // Grandchildren that outlived the command (daemons it started) go with the group.
  ::kill(-cp.pid, SIGKILL);
  run.exitCode = exitCodeOf(ws);
  return run;
}

Result<int> runInherited(const std::string& netns, const std::vector<std::string>& argv) {
  SpawnOptions o;
  o.netns = netns;
  o.argv = argv;
  // Like system(): the terminal's SIGINT reaches the command (same process group); the caller
  // only waits for it.
  struct sigaction ign{}, oldInt{}, oldQuit{};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ign, &oldInt);
  ::sigaction(SIGQUIT, &ign, &oldQuit);
  auto cp = spawn(o);
  int ws = 0;
  if (cp.ok()) {
    while (::waitpid(cp->pid, &ws, 0) < 0 && errno == EINTR) {
    }
  }
  ::sigaction(SIGINT, &oldInt, nullptr);
  ::sigaction(SIGQUIT, &oldQuit, nullptr);
  if (!cp.ok()) return cp.status();
  return exitCodeOf(ws);
}

}  // namespace reccl::testbed
