// Reads rank, size and rendezvous address from what launchers already set: torchrun
// (RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT), Open MPI
// (OMPI_COMM_WORLD_*), PMI (PMI_RANK/PMI_SIZE) and Slurm (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID).
// MPI-style launchers set no rendezvous address: RECCL_COMM_ID=host:port (or MASTER_ADDR/PORT)
// names it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/auth.h"
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
  // Public: what every rank of the job derives alike (rendezvous address, world size, the
  // launcher's job id); it tells jobs apart and proves nothing.
  uint64_t jobId = 0;
  // From RECCL_JOB_SECRET or RECCL_JOB_SECRET_FILE; all zero without (an open bootstrap).
  Key bootKey{};
  std::string secretFrom;  // the variable it came from, or empty
};

using EnvLookup = std::function<const char*(const char*)>;
// Takes the environment as a lookup function (tests pass a map); reads the file that
// RECCL_JOB_SECRET_FILE names, refusing one that others may read.
Result<LaunchEnv> parseLaunchEnv(const EnvLookup& env);
// The secret in `path`: a regular file owned by this user, with no group or other access,
// 1 B to 4 KiB (trailing newlines dropped).
Result<std::string> readJobSecretFile(const std::string& path);

uint64_t fnv1a64(const std::string& s) noexcept;

}  // namespace reccl::core
