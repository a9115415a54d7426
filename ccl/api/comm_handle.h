// Internal: what a recclComm_t points to.
#pragma once

#include <memory>
#include <mutex>

#include "core/comm.h"
#include "stream/queue.h"

struct recclComm {
  std::unique_ptr<reccl::core::Comm> impl;
  // The stream layer (ccl/stream/), made on the first call with a CUDA stream or device
  // buffers; declared after impl so it is torn down first (its worker runs on impl).
  std::mutex deviceMu;
  std::unique_ptr<reccl::stream::Queue> device;
};
