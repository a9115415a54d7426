// `reccl testbed run`: one process per rank in its host's namespace with torchrun's environment
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus
// RECCL_TESTBED=<name>. Output is streamed line by line prefixed "[rank N] ".
#pragma once

#include <string>
#include <vector>

#include "reccl/common/status.h"

namespace reccl::testbed {

struct RunOptions {
  std::string name;               // testbed
  int ranksPerHost = 1;
  std::vector<std::string> argv;
  int masterPort = 0;             // 0: a free port on host 0
  int timeoutSec = 0;             // 0: none; else all ranks are killed and 124 returned
  std::vector<std::string> env;   // extra KEY=VALUE for every rank
};

inline constexpr int kRunTimeoutExit = 124;

// Returns the first non-zero exit code in the order ranks ended (0 when all succeed); 124 on
// timeout; 128+sig when SIGINT/SIGTERM arrived (forwarded to every rank, which are then reaped).
Result<int> runRanks(const RunOptions& opts);

// A TCP port nobody listens on inside netns (nor on the port after it), out of its ephemeral range.
Result<int> freeTcpPort(const std::string& netns);

}  // namespace reccl::testbed
