// Signals turned into a readable descriptor: blocked for the calling thread while the object
// lives (threads it starts meanwhile inherit that), the mask as it was restored at the end. For
// work that a signal must not end half-way: a command that undoes what it did, a runner that
// forwards the signal to its ranks.
#pragma once

#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <initializer_list>

#include "reccl/common/unique_fd.h"

namespace reccl {

class BlockedSignals {
 public:
  explicit BlockedSignals(std::initializer_list<int> signals) {
    sigset_t set;
    sigemptyset(&set);
    for (int s : signals) sigaddset(&set, s);
    ::pthread_sigmask(SIG_BLOCK, &set, &old_);
    fd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  }
  ~BlockedSignals() {
    if (!keep_) ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

  // The signals stay blocked after this object (for a process on its way out: a signal that comes
  // after the last read would otherwise end it as the mask is restored).
  void keepBlocked() noexcept { keep_ = true; }
  // -1 when signalfd failed (errno says why).
  int fd() const { return fd_.get(); }
  // The next pending signal (consumed), 0 when none.
  int next() {
    signalfd_siginfo si{};
    if (fd_ && ::read(fd_.get(), &si, sizeof(si)) == sizeof(si)) return static_cast<int>(si.ssi_signo);
    return 0;
  }

 private:
  sigset_t old_{};
  UniqueFd fd_;
  bool keep_ = false;
};

}  // namespace reccl
