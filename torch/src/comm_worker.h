// Runs a process group's operations on its reccl communicator, one at a time and in the order
// they were issued, on a thread of its own: what a CUDA stream is to NCCL. A reccl call blocks
// until this rank's part is done and a communicator takes one call at a time, so the queue is
// what makes the process group's operations asynchronous. No libtorch here.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "reccl/reccl.h"

namespace reccl_torch {

// The first failure of a process group, shared with its Work objects (which may outlive the
// group). Once set, queued and later operations fail with it without entering reccl.
class FailureLatch {
 public:
  // False when a failure was latched already (the first one stays).
  bool set(const std::string& why);
  std::optional<std::string> get() const;

 private:
  mutable std::mutex mu_;
  std::optional<std::string> why_;
};

struct CommOp {
  using Call = std::function<recclResult_t(recclComm_t)>;
  using Done = std::function<void(const std::string& error)>;
  std::string name;  // "allreduce": for messages
  Call call;         // on the worker thread
  Done done;         // "" on success; on the worker thread
};

// The text a failed call raises in Python: the collective, the rank, reccl's code and reccl's
// own message (recclGetLastError, read on the thread that made the call).
std::string describeFailure(const std::string& op, int rank, recclResult_t result, const char* lastError);
// "reccl <op> failed on rank <rank>: " + why: every failure the backend raises starts so.
std::string failedOnRank(const std::string& op, int rank, const std::string& why);

class CommWorker {
 public:
  // Makes the communicator on the worker's thread before the first operation runs: a lane's
  // joins when its peer's first matching operation does, which must not hold up the caller.
  // Returns "" or what failed: this worker's operations fail with it, and the group's failure is
  // latched. Like an operation, it is waited for when the worker is destroyed.
  using Open = std::function<std::string(recclComm_t* comm)>;

  // Takes ownership of `comm`.
  CommWorker(recclComm_t comm, int rank, std::shared_ptr<FailureLatch> latch);
  CommWorker(Open open, int rank, std::shared_ptr<FailureLatch> latch);
  // Runs (or, once a failure is latched, fails) what is queued, then destroys the communicator.
  // A call still inside reccl after a Work gave up on it is ended by aborting the communicator.
  ~CommWorker();
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  void enqueue(CommOp op);
  // The communicator's counters; false before it was made or once it was aborted.
  bool stats(recclCommStats_t* out) const;
  // Why the communicator cannot reach `peer` any more ("failed: ..." after a failed call, "lost
  // its connection to rank N ..." when the peer died or destroyed its communicator while this
  // was idle), or nothing while it works or before it was made; from any thread.
  std::optional<std::string> cannotReach(int peer) const;

 private:
  void loop();
  void open();
  void abortStuckCall();

  const int rank_;
  std::shared_ptr<FailureLatch> latch_;
  Open open_;              // empty when the communicator was given
  std::string openError_;  // why open_ failed (worker thread only): this worker's operations fail with it
  // Guarded by mu_: the queue and the call in flight. comm_ is used by the worker thread for
  // calls and by stats(); abortStuckCall() breaks it (reccl's internal abort, which frees
  // nothing) and sets aborted_, and the destructor frees it once the thread is gone. Null until
  // open_ made it, and for good when that failed.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<CommOp> queue_;
  recclComm_t comm_ = nullptr;
  bool stop_ = false;
  bool inCall_ = false;
  bool aborted_ = false;
  std::thread thread_;
};

}  // namespace reccl_torch
