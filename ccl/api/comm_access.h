// Internal: the communicator behind a recclComm_t, for tests and in-tree tools.
#pragma once

#include "core/comm.h"
#include "reccl/reccl.h"

namespace reccl::api {
core::Comm* commImpl(recclComm_t comm) noexcept;
}  // namespace reccl::api
