// The gate that holds a user's CUDA stream until the host has finished a piece of a collective.
// A 32-bit counter in mapped pinned memory: the stream waits until (int32)(counter - value) >= 0,
// the worker thread opens it by storing a larger value. Two ways to wait, chosen by
// RECCL_CUDA_GATE:
//   memop  cuStreamWaitValue32: the stream's front end polls the word; no SM is held, and a
//          waiting context does not keep others off a shared GPU (the default where the driver
//          has it);
//   kernel a one-thread kernel that spins on the word with __nanosleep (any GPU).
// Why not cudaStreamWaitEvent: an event waits for its latest record *at the time of the wait*,
// and the host's "done" does not exist yet when the call returns. Why not a host function that
// blocks: CUDA forbids host functions that wait on work not ordered before them, and runs them
// on one thread, so ranks of one process would wait on each other there.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <string_view>

#include "reccl/common/status.h"
#include "transport/cuda/cuda_owners.h"

namespace reccl::stream {

enum class GateMode { kMemOp, kKernel };
const char* gateModeName(GateMode m) noexcept;  // "memop", "kernel"
// "auto" -> memop where the driver exports cuStreamWaitValue32, else kernel.
Result<GateMode> parseGateMode(std::string_view setting, bool memOpAvailable);

class StreamGate {
 public:
  static Result<StreamGate> create(GateMode mode);
  StreamGate() = default;
  StreamGate(StreamGate&&) noexcept = default;
  StreamGate& operator=(StreamGate&&) noexcept = default;

  // Enqueues on `stream`: work after this waits until the gate reaches `value` (cyclic >=).
  Status wait(cudaStream_t stream, uint32_t value);
  // Opens the gate up to `value` (never lowers it: concurrent openers keep the larger).
  void open(uint32_t value) noexcept;
  uint32_t value() const noexcept;
  GateMode mode() const noexcept { return mode_; }
  // Gives up ownership of the word (a stream may still wait on it at teardown: the word must
  // outlive that wait, so it is leaked on purpose).
  void leak() noexcept { (void)word_.release(); }

  static bool memOpAvailable() noexcept;

 private:
  GateMode mode_ = GateMode::kKernel;
  cuda::PinnedBuffer word_;
  uint32_t* devWord_ = nullptr;  // the same word's device address
};

// The spinning kernel's launcher (stream_gate_kernel.cu).
cudaError_t launchGateKernel(const uint32_t* devWord, uint32_t value, cudaStream_t stream) noexcept;

}  // namespace reccl::stream
