// SIGINT/SIGTERM/SIGHUP as a readable fd for commands that must undo what they did when a user
// interrupts them (`inject plan`/`flap` restore their faults, `testbed up` removes what it
// built): blocked while the object lives, so no signal can end the process half-way.
#pragma once

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "reccl/common/unique_fd.h"

namespace reccl::cli {

class StopSignals {
 public:
  StopSignals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, &old_);
    fd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  }
  // Signals that came while the work was undone are consumed first: the first one decided
  // the exit code, and a later one must not end the process with another.
  ~StopSignals() {
    while (caught() != 0) {
    }
    sigprocmask(SIG_SETMASK, &old_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  int fd() const { return fd_.get(); }
  // The next pending signal (consumed), 0 when none.
  int caught() {
    signalfd_siginfo si{};
    if (fd_ && ::read(fd_.get(), &si, sizeof(si)) == sizeof(si)) return static_cast<int>(si.ssi_signo);
    return 0;
  }

 private:
  sigset_t old_{};
  UniqueFd fd_;
};

}  // namespace reccl::cli
