#include "comm_worker.h"

#include "api/comm_access.h"

#include <chrono>
#include <utility>

namespace reccl_torch {

bool FailureLatch::set(const std::string& why) {
  std::lock_guard lk(mu_);
  if (why_) return false;
  why_ = why;
  return true;
}

std::optional<std::string> FailureLatch::get() const {
  std::lock_guard lk(mu_);
  return why_;
}

std::string failedOnRank(const std::string& op, int rank, const std::string& why) {
  return "reccl " + op + " failed on rank " + std::to_string(rank) + ": " + why;
}

std::string describeFailure(const std::string& op, int rank, recclResult_t result, const char* lastError) {
  std::string s = failedOnRank(op, rank, recclGetErrorString(result));
  if (lastError && *lastError) s += std::string(": ") + lastError;
  return s;
}

CommWorker::CommWorker(recclComm_t comm, int rank, std::shared_ptr<FailureLatch> latch)
    : rank_(rank), latch_(std::move(latch)), comm_(comm), thread_([this] { loop(); }) {}

CommWorker::CommWorker(Open open, int rank, std::shared_ptr<FailureLatch> latch)
    : rank_(rank), latch_(std::move(latch)), open_(std::move(open)), thread_([this] { loop(); }) {}

CommWorker::~CommWorker() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  abortStuckCall();
  thread_.join();
  if (!comm_) return;
  if (aborted_) recclCommAbort(comm_);
  else recclCommDestroy(comm_);
}

void CommWorker::abortStuckCall() {
  // Only a call a Work has given up on (its timeout latched a failure) is cut short; any other
  // call in flight finishes, bounded by reccl's own deadlines. The communicator is broken, not
  // freed (an operation may make several reccl calls, and the next would meet a freed one): the
  // call inside returns, later ones fail at once, and the destructor frees it after the join.
  if (!latch_->get()) return;
  std::unique_lock lk(mu_);
  if (!inCall_ || !comm_) return;
  aborted_ = true;
  lk.unlock();
  if (reccl::core::Comm* c = reccl::api::commImpl(comm_)) c->abort();
}

void CommWorker::enqueue(CommOp op) {
  {
    std::lock_guard lk(mu_);
    queue_.push_back(std::move(op));
  }
  cv_.notify_all();
}

std::optional<std::string> CommWorker::cannotReach(int peer) const {
  std::lock_guard lk(mu_);
  if (aborted_ || !comm_) return std::nullopt;
  recclResult_t state = recclSuccess;
  if (recclCommGetAsyncError(comm_, &state) == recclSuccess && state != recclSuccess && state != recclInProgress) {
    std::string why = std::string("failed: ") + recclGetErrorString(state);
    const char* detail = recclGetLastError(nullptr);  // set by recclCommGetAsyncError on this thread
    if (detail && *detail) why += std::string(": ") + detail;
    return why;
  }
  // A connection lost while nothing ran is no async error (NCCL reports none either).
  int lost = 0;
  if (recclCommPeerLost(comm_, peer, &lost) == recclSuccess && lost)
    return "lost its connection to rank " + std::to_string(peer) + " (which died or destroyed the group)";
  return std::nullopt;
}

bool CommWorker::stats(recclCommStats_t* out) const {
  std::lock_guard lk(mu_);
  if (aborted_ || !comm_) return false;
  out->size = sizeof(*out);
  return recclCommGetStats(comm_, out) == recclSuccess;
}

void CommWorker::open() {
  recclComm_t made = nullptr;
  std::string error;
  try {
    error = open_(&made);
  } catch (const std::exception& e) {  // an opening says its failures; one that throws failed too
    error = e.what();
  }
  if (!error.empty()) {
    openError_ = error;
    latch_->set(error);
    return;
  }
  std::lock_guard lk(mu_);
  comm_ = made;
}

void CommWorker::loop() {
  if (open_) open();
  for (;;) {
    CommOp op;
    std::optional<std::string> latched;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      op = std::move(queue_.front());
      queue_.pop_front();
      // A lane that could not be made fails its own operations with its own reason, whatever
      // failure the group latched first.
      latched = openError_.empty() ? latch_->get() : openError_;
      if (!latched) {
        inCall_ = true;
      }
    }
    if (latched) {
      op.done(*latched);
      continue;
    }
    std::string error;
    try {
      recclResult_t r = op.call(comm_);
      if (r != recclSuccess) {
        error = describeFailure(op.name, rank_, r, recclGetLastError(nullptr));
        // An argument reccl refused leaves the communicator usable; anything else broke it.
        if (r != recclInvalidArgument) latch_->set(error);
      }
    } catch (const std::exception& e) {  // the tensor work around the call (copies out)
      error = failedOnRank(op.name, rank_, e.what());
    }
    {
      std::lock_guard lk(mu_);
      inCall_ = false;
    }
    op.done(error);
  }
}

}  // namespace reccl_torch
