// The Work (request) a reccl process group returns: completed by the group's worker thread,
// waited on from Python, with a future for DDP's communication hooks.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "comm_worker.h"

namespace reccl_torch {

class WorkReccl : public c10d::Work {
 public:
  // `timeout` bounds wait() without an argument, counted from now (the operation's issue, as
  // ProcessGroupNCCL counts it); `latch` is the group's failure latch.
  WorkReccl(int rank, c10d::OpType type, std::string name, std::vector<at::Tensor> outputs,
            std::chrono::milliseconds timeout, std::shared_ptr<FailureLatch> latch);

  // Waits until the operation completed or its deadline: `timeout` from now, or without one
  // the process group's timeout from the operation's issue. Raises reccl's message when the
  // operation failed. A deadline that passes fails this operation and latches the failure on
  // the group, so every later operation fails at once instead of running out of step.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Marks the operation done ("" = success) and completes the future; only the first call counts.
  void complete(const std::string& error);

 private:
  const std::string name_;
  const std::vector<at::Tensor> outputs_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::steady_clock::time_point issued_;
  std::shared_ptr<FailureLatch> latch_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<bool> done_{false};
};

}  // namespace reccl_torch
