// Reads rank, size and rendezvous address from what launchers already set: torchrun
// (RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT), Open MPI
// (OMPI_COMM_WORLD_*), PMI (PMI_RANK/PMI_SIZE) and Slurm (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID,
// the local size from SLURM_STEP_TASKS_PER_NODE and SLURM_NODEID).
// The rendezvous address, first found wins: RECCL_COMM_ID=host:port; MASTER_ADDR/MASTER_PORT
// (where torchrun's agent holds MASTER_PORT, a port derived from it);
// under srun the step's first node (SLURM_STEP_NODELIST, where task 0 runs) for a missing host
// and a port derived from SLURM_JOB_ID/SLURM_STEP_ID for a missing port; else, where the launcher
// runs a PMIx server (PMIX_NAMESPACE: Open MPI's mpirun), rank 0's address shared through PMIx
// at init (rendezvous = kPmix). Nothing of these: kInvalidUsage naming what to set.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/auth.h"
#include "reccl/common/status.h"

namespace reccl::core {

enum class Rendezvous {
  kAddress,  // rootHost:rootPort
  kPmix,     // rank 0 binds any port and shares its address through the launcher's PMIx server
};

struct LaunchEnv {
  int rank = -1;
  int nranks = 0;
  int localRank = -1;   // -1 when the launcher does not say
  int localNranks = -1;
  std::string rootHost;
  uint16_t rootPort = 0;
  std::string source;   // "torchrun", "ompi", "pmi", "slurm"
  Rendezvous rendezvous = Rendezvous::kAddress;
  std::string addressFrom;  // the variables rootHost and rootPort came from (for the log line)
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

// The first host of a Slurm hostlist expression: "gpu[07-09,11],login1" -> "gpu07",
// "r[1-2]-n[3-4]" -> "r1-n3".
Result<std::string> firstHostOfNodeList(const std::string& list);
// Tasks on node `nodeIndex` of a Slurm tasks-per-node list: "2(x3),1" is 2, 2, 2, 1.
Result<int> tasksOnNode(const std::string& list, int nodeIndex);
// The rendezvous port every task of a Slurm step derives alike, 20000..29999: unlike the
// ephemeral ports (32768.. on Linux), and two steps of one job almost never share one.
uint16_t slurmStepPort(const std::string& jobId, const std::string& stepId) noexcept;
// Where torchrun's agent holds MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), the port rank 0
// binds instead: 20000..29999 from MASTER_ADDR, MASTER_PORT, the run id and the restart count
// (a restarted run gets another one).
uint16_t torchrunAgentStorePort(const std::string& masterAddr, const std::string& masterPort, const std::string& runId,
                                const std::string& restart) noexcept;

}  // namespace reccl::core
