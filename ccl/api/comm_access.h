// Internal: the communicator behind a recclComm_t, for tests and in-tree tools.
#pragma once

#include <string>

#include "core/comm.h"
#include "core/launch_env.h"
#include "reccl/reccl.h"

namespace reccl::api {
core::Comm* commImpl(recclComm_t comm) noexcept;
// recclCommInitFromEnv's work after the environment is parsed (tests run ranks as threads with
// an environment each).
recclResult_t initFromLaunchEnv(recclComm_t* comm, core::LaunchEnv env);
// recclCommInitRankConfig with `homeNic` (core::CommOptions::homeNic): the channels this rank
// sends on start on that NIC's rail. The NCCL net plugin's per-NIC devices.
recclResult_t initRankOnNic(recclComm_t* comm, int nranks, const recclUniqueId& id, int rank,
                            const recclConfig_t* config, const std::string& homeNic);
}  // namespace reccl::api
