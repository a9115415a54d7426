// The stream layer's face to the API: one per communicator, created on its first call with a
// CUDA stream or device buffers. No CUDA types here, so the API compiles the same in builds
// without CUDA (where no queue is ever made).
#pragma once

#include "algo/collective.h"
#include "reccl/common/status.h"

namespace reccl::stream {

class Queue {
 public:
  virtual ~Queue() = default;
  // NCCL's semantics: enqueues `c` on `stream` (a cudaStream_t) and returns; the collective
  // starts once the stream's earlier work is done and the stream's later work waits for it.
  // stream == nullptr: the legacy default stream, and the call returns when it has completed.
  virtual Status enqueue(const algo::Collective& c, void* stream) = 0;
  // A host call (host buffers, NULL stream) made while enqueued work is pending: runs after it,
  // in order, and returns its result.
  virtual Status runAfterQueued(const algo::Collective& c) = 0;
  virtual bool idle() const = 0;
  // The first error of enqueued work (Ok if none).
  virtual Status asyncError() const = 0;
  // recclCommAbort: stop waiting for streams; fail what is queued.
  virtual void abort() noexcept = 0;
};

}  // namespace reccl::stream
