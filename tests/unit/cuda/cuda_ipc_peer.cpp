// The relay end of a CUDA IPC pipe for cuda_device_test: attaches to the pipe whose memfd and
// eventfds arrive as descriptors 3, 4, 5 (the control socket to the origin is 6) and forwards
// what comes up to the down ring through its own device buffer, as a relay's forward thread
// would. Modes: "echo BYTES" forwards BYTES bytes and exits 0; "break" marks the pipe broken
// (the relay lost its rail) and exits.
// Exit: 0 done, 2 usage, 3 attach or transfer failed (message on stderr), 77 no CUDA device.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "transport/cuda/device_probe.h"
#include "transport/cuda/ipc_pipe.h"

int main(int argc, char** argv) {
  using namespace reccl;
  if (argc < 2) return 2;
  std::string mode = argv[1];
  if (cuda::deviceCount() == 0) return 77;
  auto pipe = cuda::IpcPipe::attach(UniqueFd(3), UniqueFd(4), UniqueFd(5));
  if (!pipe.ok()) {
    std::fprintf(stderr, "cuda_ipc_peer: attach: %s\n", pipe.status().ToString().c_str());
    return 3;
  }
  if (mode == "break") {
    pipe->markBroken(cuda::IpcPipeBreak::kLink);
    return 0;
  }
  if (mode != "echo" || argc < 3) return 2;
  size_t total = std::strtoull(argv[2], nullptr, 10);
  const size_t chunk = 256 * 1024;
  void* buf = nullptr;
  if (cudaMalloc(&buf, chunk) != cudaSuccess) return 3;
  const int ctrl = 6;
  const Deadline d = Deadline::afterMs(60000);
  for (size_t done = 0; done < total;) {
    size_t n = std::min(chunk, total - done);
    Status s = pipe->readAll(pipe->up(), buf, n, pipe->relayWakeFd(), ctrl, d);
    if (s.ok()) s = pipe->writeAll(pipe->down(), buf, n, pipe->relayWakeFd(), ctrl, d);
    if (!s.ok()) {
      std::fprintf(stderr, "cuda_ipc_peer: forward at %zu: %s\n", done, s.ToString().c_str());
      return 3;
    }
    done += n;
  }
  cudaFree(buf);
  return 0;
}
