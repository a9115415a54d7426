// Internal to the C API: what a recclComm_t points at. The core communicator once it exists, the
// settings it was made with (recclCommSplit's children inherit them), and the state of work a
// non-blocking communicator runs on a thread of its own (its init, its finalize).
//
// Who touches what: `impl` is written once, by the thread that settles a finished init (blocking
// init: the caller), before `state` becomes kReady (release); others read it only after seeing a
// state past kInitializing (acquire). `pending` and `failure` are guarded by settleMu. The thread
// of a pending operation touches only its PendingOp (and, for finalize, `impl` inside
// core::Comm::run, which recclCommAbort waits out).
#pragma once

#include <atomic>
#include <climits>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "core/comm.h"
#include "core/wire.h"
#include "reccl/common/status.h"
#include "reccl/reccl.h"

namespace reccl::api {

// recclConfig_t after validation; kUnset fields take the environment's value (RECCL_*).
struct CommConfig {
  static constexpr int kUnset = RECCL_CONFIG_UNDEF_INT;
  bool blocking = true;
  int nChannels = kUnset;
  int timeoutMs = kUnset;
  int bootstrapTimeoutMs = kUnset;
  std::string name;
};

// Reads and checks a caller's recclConfig_t (NULL: `inherit`); the message names the field.
Status readConfig(const recclConfig_t* config, const CommConfig& inherit, CommConfig* out);
// The RECCL_* settings with the config's fields laid over them.
Status commOptions(const CommConfig& cfg, core::CommOptions* out);

// One operation a non-blocking communicator runs on a thread of its own.
struct PendingOp {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;                 // the operation finished (status is final)
  bool abandoned = false;            // the handle was aborted: the thread frees what it made
  Status status;
  std::unique_ptr<core::Comm> made;  // init's result, moved into the handle when settled
};

}  // namespace reccl::api

struct recclComm {
  enum State : int { kInitializing, kReady, kFailed, kFinalizing, kFinalized };
  std::atomic<int> state{kReady};
  std::unique_ptr<reccl::core::Comm> impl;
  reccl::api::CommConfig config;
  std::mutex settleMu;
  std::shared_ptr<reccl::api::PendingOp> pending;
  reccl::Status failure;  // kFailed: the init's error; kFinalized: finalize's, if it failed
};

namespace reccl::api {

// Moves a finished pending operation's outcome into the handle; returns the state after that.
int settle(recclComm_t comm);
// The core communicator when comm can take work now; else an error naming why (NULL, init still
// running, init failed, finalized).
recclResult_t usable(recclComm_t comm, core::Comm** out);

// Creates the communicator for `rank` of `nranks` at the rendezvous in `id`: at once (blocking
// config) or on a thread of its own (recclInProgress, *comm set). `root`, when given, is a
// bootstrap root this rank holds for the communicator's lifetime.
recclResult_t startInit(recclComm_t* comm, const CommConfig& cfg, int nranks, const core::UniqueIdData& id, int rank,
                        std::shared_ptr<core::BootstrapRoot> root = nullptr);

// The address ranks reach this host's bootstrap root at (network order): RECCL_BOOTSTRAP_IFNAME's,
// else the first non-loopback interface's, else loopback.
Result<uint32_t> bootstrapAddress();

// A bootstrap root for a new unique id, listening on the address ranks reach this host at
// (RECCL_BOOTSTRAP_IFNAME's, else the first non-loopback interface's); detached: it serves until
// its rank table went out or its deadline passed.
Result<core::UniqueIdData> startDetachedRoot();

}  // namespace reccl::api
