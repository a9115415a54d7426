// A progress thread for verbs paths: polls every path's completions; when none has work it arms
// their completion queues and sleeps in epoll on their completion channels (plus an eventfd for
// changes), so an idle connection costs no CPU. A kWrite sender with steps outstanding learns
// its acks only from memory: while one does, the thread polls without sleeping (yielding).
//
// A path's failure is reported on this thread (VerbsPath::progress -> PortBase::pathFailed):
// the failover hook must not call remove() from there (it would wait for itself).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "transport/verbs/verbs_paths.h"

namespace reccl::transport::verbs {

class VerbsProgress {
 public:
  static Result<std::unique_ptr<VerbsProgress>> start(std::string name);
  ~VerbsProgress();  // stops the thread; paths still added are left alone
  VerbsProgress(const VerbsProgress&) = delete;
  VerbsProgress& operator=(const VerbsProgress&) = delete;

  Status add(VerbsPath* path);
  // Returns once the thread no longer touches `path` (it may then be drained and destroyed).
  void remove(VerbsPath* path);
  // CPU time the progress thread has used (CLOCK_THREAD_CPUTIME_ID), for measurements.
  uint64_t cpuNs() const noexcept { return cpuNs_.load(std::memory_order_relaxed); }
  // Times the thread went to sleep in epoll.
  uint64_t sleeps() const noexcept { return sleeps_.load(std::memory_order_relaxed); }

 private:
  VerbsProgress() = default;
  void run() noexcept;
  // One pass over the paths; returns the work done.
  int pass() noexcept;

  std::string name_;
  UniqueFd epoll_;
  UniqueFd wake_;
  std::mutex mu_;  // held by the thread during a pass; add/remove take it
  std::vector<VerbsPath*> paths_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> cpuNs_{0};
  std::atomic<uint64_t> sleeps_{0};
  std::thread thread_;
};

}  // namespace reccl::transport::verbs
