// Waiting for a communicator's fault source to be up before timing: the in-process detector
// probes and loads its BPF programs on a thread of its own after init (~0.3 s of CPU), which
// would otherwise run inside the first timed iterations, as NCCL's init would not.
#pragma once

#include <string>

#include "reccl/reccl.h"

namespace reccl::bench {

struct SourceWait {
  bool ready = false;  // false: still starting at the deadline (the bench times anyway)
  long waitedMs = 0;
  std::string source;  // recclCommStats_t.faultSourceName at the end
};

// How long a bench waits for it: a loaded machine takes seconds to load the BPF programs.
inline constexpr long kSourceWaitMs = 10000;

SourceWait waitFaultSourceReady(recclComm_t comm, long deadlineMs = kSourceWaitMs);

// "# fault source: bpf:... (up 312 ms after init)" or why not, for the table's header.
std::string formatSourceLine(const SourceWait& w);

}  // namespace reccl::bench
