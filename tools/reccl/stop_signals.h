// SIGINT/SIGTERM/SIGHUP as a readable fd for commands that must undo what they did when a user
// interrupts them (`inject plan`/`flap` restore their faults, `testbed up` removes what it
// built): blocked while the object lives, so no signal can end the process half-way.
#pragma once

#include <signal.h>

#include "reccl/common/blocked_signals.h"

namespace reccl::cli {

class StopSignals {
 public:
  // Signals that came while the work was undone are consumed first: the first one decided
  // the exit code, and a later one must not end the process with another. After an interrupt the
  // command exits with that code, so the signals stay blocked to the end: one that comes after
  // this last read is dropped at exit instead of killing the process once the mask is restored.
  ~StopSignals() {
    while (caught() != 0) {
    }
    if (interrupted_) signals_.keepBlocked();
  }

  int fd() const { return signals_.fd(); }
  // The next pending signal (consumed), 0 when none.
  int caught() {
    int s = signals_.next();
    interrupted_ = interrupted_ || s != 0;
    return s;
  }

 private:
  BlockedSignals signals_{SIGINT, SIGTERM, SIGHUP};
  bool interrupted_ = false;
};

}  // namespace reccl::cli
