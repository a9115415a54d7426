// Reads rank, size and rendezvous address from what launchers already set: torchrun
// (RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT), Open MPI
// (OMPI_COMM_WORLD_*), PMI (PMI_RANK/PMI_SIZE) and Slurm (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID).
// MPI-style launchers set no rendezvous address: RECCL_COMM_ID=host:port (or MASTER_ADDR/PORT)
// names it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "reccl/common/status.h"

namespace reccl::core {

struct LaunchEnv {
  int rank = -1;
  int nranks = 0;
  int localRank = -1;   // -1 when the launcher does not say
  int localNranks = -1;
  std::string rootHost;
  uint16_t rootPort = 0;
  std::string source;   // "torchrun", "ompi", "pmi", "slurm"
  uint64_t secret = 0;  // per-job secret every rank derives identically
  uint64_t commId = 0;
};

using EnvLookup = std::function<const char*(const char*)>;
// Pure: takes the environment as a lookup function (tests pass a map).
Result<LaunchEnv> parseLaunchEnv(const EnvLookup& env);

uint64_t fnv1a64(const std::string& s) noexcept;

}  // namespace reccl::core
