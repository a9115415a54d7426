#include "transport/cuda/relay_pipe_choice.h"

#include <string>

namespace reccl::cuda {

const char* relayPipeKindName(RelayPipeKind k) noexcept {
  return k == RelayPipeKind::kCudaIpc ? "cuda-ipc" : "shm";
}

Result<RelayPipeKind> chooseRelayPipe(std::string_view setting, const RelayPipeEnds& e) {
  const bool usable = e.originGpu && e.relayGpu && e.reachable;
  if (setting == "shm") return RelayPipeKind::kSharedMemory;
  if (setting == "auto") return usable ? RelayPipeKind::kCudaIpc : RelayPipeKind::kSharedMemory;
  if (setting == "ipc") {
    if (usable) return RelayPipeKind::kCudaIpc;
    const char* why = !e.originGpu ? "the origin rank has no CUDA device"
                      : !e.relayGpu ? "the relay rank has no CUDA device"
                                    : "the relay's GPU cannot map the origin's memory (no peer access)";
    return Status(Errc::kUnsupported, std::string("RECCL_CUDA_RELAY=ipc: ") + why);
  }
  return Status(Errc::kInvalidArgument, "RECCL_CUDA_RELAY=" + std::string(setting) + " is not auto, ipc or shm");
}

}  // namespace reccl::cuda
