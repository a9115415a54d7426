// Starting commands inside a testbed host: fork, setns() into the host's network namespace in
// the child, a private mount namespace with /sys remounted (as `ip netns exec` does, so
// /sys/class/net shows the host's NICs), then exec.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::testbed {

struct SpawnOptions {
  std::string netns;              // /run/netns name; empty: stay in the current namespace
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  std::vector<std::string> env;   // "KEY=VALUE" added to (overriding) the inherited environment
  bool captureStdout = false;     // else inherited
  bool captureStderr = false;
  bool newProcessGroup = false;   // so the whole group can be signalled
  bool dieWithParent = true;      // PR_SET_PDEATHSIG(SIGKILL): never orphaned
  // The command's whole process group dies with the caller, not only its first process: the
  // child stays as a small supervisor that leads the group, runs the command as its own child
  // and kills the group when the caller dies (any way, SIGKILL included). It exits with the
  // command's exit code (128+signal when a signal ended it); signals sent to the group reach the
  // command, the supervisor only waits. Implies newProcessGroup. Processes that leave the group
  // (setsid, setpgid) are not covered.
  bool groupDiesWithParent = false;
};

struct ChildProcess {
  pid_t pid = -1;
  UniqueFd stdoutFd;  // read ends when captured
  UniqueFd stderrFd;
};

// Returns once the child has exec'd; an exec or setns failure comes back as a Status.
Result<ChildProcess> spawn(const SpawnOptions& opts);

// Exit code as a shell reports it: status for a normal exit, 128+signal for a signal.
int exitCodeOf(int waitStatus) noexcept;

struct CapturedRun {
  int exitCode = -1;
  std::string out;
  std::string err;
  bool timedOut = false;
};

// Runs argv in netns, captures stdout/stderr, kills it (SIGKILL) at the deadline.
Result<CapturedRun> runCaptured(const std::string& netns, const std::vector<std::string>& argv,
                                std::chrono::milliseconds timeout);
// Runs argv in netns with inherited stdio and waits; returns its exit code.
Result<int> runInherited(const std::string& netns, const std::vector<std::string>& argv);

}  // namespace reccl::testbed
