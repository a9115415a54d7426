#include "stream/stream_gate.h"

#include <cuda.h>

#include <string>

#include "reccl/common/log.h"
#include "transport/cuda/cuda_status.h"
#include "transport/cuda/device_probe.h"

namespace reccl::stream {
namespace {

using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

WaitValue32 waitValue32() noexcept {
  static const auto fn = reinterpret_cast<WaitValue32>(cuda::driverEntry("cuStreamWaitValue32"));
  return fn;
}

std::atomic_ref<uint32_t> wordRef(const cuda::PinnedBuffer& b) {
  return std::atomic_ref<uint32_t>(*static_cast<uint32_t*>(b.get()));
}

}  // namespace

const char* gateModeName(GateMode m) noexcept { return m == GateMode::kMemOp ? "memop" : "kernel"; }

Result<GateMode> parseGateMode(std::string_view s, bool memOpAvailable) {
  if (s == "memop") {
    if (!memOpAvailable) return Status(Errc::kUnsupported, "RECCL_CUDA_GATE=memop: the driver has no cuStreamWaitValue32");
    return GateMode::kMemOp;
  }
  if (s == "kernel") return GateMode::kKernel;
  if (s == "auto" || s.empty()) return memOpAvailable ? GateMode::kMemOp : GateMode::kKernel;
  return Status(Errc::kInvalidArgument, "RECCL_CUDA_GATE=" + std::string(s) + " is not auto, memop or kernel");
}

bool StreamGate::memOpAvailable() noexcept { return waitValue32() != nullptr; }

Result<StreamGate> StreamGate::create(GateMode mode) {
  StreamGate g;
  g.mode_ = mode;
  RECCL_ASSIGN_OR_RETURN(g.word_, cuda::PinnedBuffer::create(64, /*mapped=*/true));
  *static_cast<uint32_t*>(g.word_.get()) = 0;
  void* dev = nullptr;
  RECCL_CUDA_TRY(cudaHostGetDevicePointer(&dev, g.word_.get(), 0));
  g.devWord_ = static_cast<uint32_t*>(dev);
  return g;
}

Status StreamGate::wait(cudaStream_t stream, uint32_t value) {
  if (mode_ == GateMode::kMemOp) {
    CUresult r = waitValue32()(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(devWord_), value,
                               CU_STREAM_WAIT_VALUE_GEQ);
    if (r == CUDA_SUCCESS) return Status::Ok();
    if (r == CUDA_ERROR_NOT_SUPPORTED) {
      RECCL_WARN(kLogColl, "cuda gate: this device refuses cuStreamWaitValue32; the gate spins a kernel instead");
      mode_ = GateMode::kKernel;
      return cuda::cudaStatus(launchGateKernel(devWord_, value, stream), "gate kernel launch");
    }
    return Status(Errc::kDevice, "cuStreamWaitValue32: CUresult " + std::to_string(int(r)));
  }
  return cuda::cudaStatus(launchGateKernel(devWord_, value, stream), "gate kernel launch");
}

void StreamGate::open(uint32_t value) noexcept {
  if (!word_) return;  // never made: no stream can wait on it
  auto w = wordRef(word_);
  uint32_t cur = w.load(std::memory_order_relaxed);
  while (static_cast<int32_t>(value - cur) > 0 &&
         !w.compare_exchange_weak(cur, value, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

uint32_t StreamGate::value() const noexcept { return word_ ? wordRef(word_).load(std::memory_order_acquire) : 0; }

}  // namespace reccl::stream
