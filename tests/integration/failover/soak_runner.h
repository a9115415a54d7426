// Plays a soak plan (soak_plan.h) on a testbed while the failover worker runs every collective in
// turn on every rank and checks each result bit for bit:
// - link faults through reccl_inject (rtnetlink admin state of the host NIC or its switch port,
//   TUNSETCARRIER on tap NICs), gray loss through the tc drop program on the switch port;
// - after a phase, waits until every fault is over and every rank reports all its rails up;
// - a planned kill SIGKILLs one rank, requires every other rank to error within
//   RECCL_STALL_TIMEOUT_MS + RECCL_FAILOVER_TIMEOUT_MS of the kill, and starts the job again;
// - fails on any wrong result, any error outside a kill, any rank without progress for
//   2 x RECCL_TIMEOUT_MS + 10 s (a hang), and on the run's own deadline.
// Every device is put back and every drop program removed at the end, and by a guard process
// when the test process dies.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "reccl/testbed/testbed_state.h"
#include "soak_plan.h"

namespace reccl::test::soak {

// The ranks' deadlines; a kill must become an error on every other rank within
// stallMs + failoverMs (the far end of a dead path notices by its stall check, then has the
// failover timeout to find no way to the dead rank).
struct SoakDeadlines {
  int timeoutMs = 20000;  // RECCL_TIMEOUT_MS
  int stallMs = 1000;     // RECCL_STALL_TIMEOUT_MS
  int failoverMs = 3000;  // RECCL_FAILOVER_TIMEOUT_MS
  int killBoundMs() const { return stallMs + failoverMs; }
};

struct SoakOptions {
  SoakShape shape;
  SoakSpec spec;
  SoakDeadlines deadlines;
  std::string workerEnv;  // more environment for every rank ("NAME=value ...")
  // Faults start once every rank has run this many iterations: two rounds of the 7 collectives,
  // so that every connection exists (they are made lazily by the first call on them; faults while
  // they are being made are their own tests, ConnectionsMadeDuringAFault in failover_soak_test).
  // 0: as soon as every rank has connected ("started").
  int warmupIters = 14;
  std::string logPath;  // a JSON line per event ("": none); the jobs' output beside it on failure
  std::string replay;   // the command that replays this run, for failure messages
};

struct KillRecord {
  int afterFault = 0;
  int rank = 0;  // -1: not a kill but every rail of a host down (runAllRailsDown)
  bool whileFaulted = false;
  std::vector<double> errorMs;  // kill -> error returned, per other rank
  double maxMs() const;
};

struct SoakReport {
  bool ok = true;
  std::string failure;  // seed, replay command, recent events, the job's output tail
  int faultsPlayed = 0;
  std::array<int, kNumFaultKinds> perKind{};
  std::array<int, 3> flapsVia{};  // by FlapVia
  int jobs = 0;
  uint64_t iterations = 0, failovers = 0, failbacks = 0, bytesResent = 0;
  int degradedFailovers = 0;  // failovers with reason degraded (gray loss acted on)
  int relayedMoves = 0;       // connections moved onto a relay ("relayed via rank" lines)
  double maxIterMs = 0;       // the longest iteration any rank reported
  std::vector<KillRecord> kills;
  std::vector<double> drainMs;  // phase end -> every rail back up at every rank
  double seconds = 0;
  std::string summary() const;  // a few lines of figures
};

SoakReport runSoak(const testbed::TestbedState& tb, const SoakOptions& options);

// The separate check: every rail of `host` pulled at once by `kind` (host-link, switch-link or a
// carrier kind, held until every rank has errored). Every rank must error within the kill bound;
// the report holds one KillRecord (rank -1) with each rank's time. options.spec is not used.
SoakReport runAllRailsDown(const testbed::TestbedState& tb, const SoakOptions& options, FaultKind kind, int host);

}  // namespace reccl::test::soak
