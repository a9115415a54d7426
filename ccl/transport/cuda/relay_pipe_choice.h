// Which pipe carries a relayed connection of device memory once the routing policy
// (RECCL_FAILOVER_ROUTE, RECCL_NIC_AFFINITY) has chosen to relay it through a same-host rank: the
// CUDA IPC pipe (ipc_pipe.h) when both ranks drive a GPU and the relay's GPU reaches the origin's
// memory (the same GPU, or peer access over NVLink/PCIe), else the shared-memory pipe
// (failover/relay/relay_pipe.h). The policy that decides *whether* to relay is the same for both;
// this decides only the medium. Pure, for a table test. Today's route relays the channels' host
// slots and so always takes shared memory (RECCL_CUDA_RELAY accepts auto and shm; docs/cuda.md).
#pragma once

#include <string_view>

#include "reccl/common/status.h"

namespace reccl::cuda {

enum class RelayPipeKind { kSharedMemory, kCudaIpc };

const char* relayPipeKindName(RelayPipeKind k) noexcept;  // "shm", "cuda-ipc"

struct RelayPipeEnds {
  bool originGpu = false;  // the origin rank has a CUDA device (its data live there)
  bool relayGpu = false;   // the relay rank has one
  bool reachable = false;  // the relay's device can map the origin's memory (same GPU or peer access)
};

// setting: "auto", "ipc" or "shm". "ipc" refuses ends that cannot use it
// (kUnsupported naming why), so a forced choice never silently becomes the other one.
Result<RelayPipeKind> chooseRelayPipe(std::string_view setting, const RelayPipeEnds& ends);

}  // namespace reccl::cuda
