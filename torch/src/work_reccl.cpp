#include "work_reccl.h"

#include <stdexcept>
#include <utility>

#include <ATen/core/jit_type.h>

namespace reccl_torch {

WorkReccl::WorkReccl(int rank, c10d::OpType type, std::string name, std::vector<at::Tensor> outputs,
                     std::chrono::milliseconds timeout, std::shared_ptr<FailureLatch> latch)
    : c10d::Work(rank, type),
      name_(std::move(name)),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      issued_(std::chrono::steady_clock::now()),
      latch_(std::move(latch)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

bool WorkReccl::wait(std::chrono::milliseconds timeout) {
  const bool own = timeout == kNoTimeout;
  const auto limit = own ? timeout_ : timeout;
  const auto deadline = (own ? issued_ : std::chrono::steady_clock::now()) + limit;
  std::unique_lock lk(mutex_);
  if (!cv_.wait_until(lk, deadline, [&] { return completed_; })) {
    lk.unlock();
    std::string why = "reccl " + name_ + " on rank " + std::to_string(rank_) + " did not complete within " +
                      std::to_string(limit.count()) + " ms (" +
                      (own ? "the process group's timeout" : "the timeout given to wait") +
                      "); the process group fails every later operation";
    latch_->set(why);
    complete(why);
    lk.lock();
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

std::vector<at::Tensor> WorkReccl::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> WorkReccl::getFuture() { return future_; }

void WorkReccl::complete(const std::string& error) {
  if (done_.exchange(true)) return;
  std::exception_ptr e;
  if (!error.empty()) e = std::make_exception_ptr(std::runtime_error(error));
  finish(e);
  if (e) {
    future_->setError(e);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

}  // namespace reccl_torch
