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
  // the exit code, and a later one must not end the process with another.
  ~StopSignals() {
    while (caught() != 0) {
    }
  }

  int fd() const { return signals_.fd(); }
  // The next pending signal (consumed), 0 when none.
  int caught() { return signals_.next(); }

 private:
  BlockedSignals signals_{SIGINT, SIGTERM, SIGHUP};
};

}  // namespace reccl::cli
