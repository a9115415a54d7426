// Rank 0's bootstrap address handed to every rank through the launcher's own PMIx server (Open
// MPI's mpirun, PRRTE's prterun, Slurm's srun --mpi=pmix): rank 0 puts it, every rank joins a
// fence of the job's namespace, the others get it. The data stays inside the launcher's job.
// libpmix is loaded at run time, so libreccl needs it only where a launcher offers PMIx.
#pragma once

#include <cstdint>
#include <string>

#include "reccl/common/status.h"

namespace reccl::api {

// `rank` is this process's rank as the launcher's environment gave it (PMIx must agree);
// rootAddress is rank 0's "a.b.c.d:port" (others pass ""). Returns rank 0's address on every
// rank, or an error within timeoutMs (a rank that never arrives fails the fence).
Result<std::string> pmixShareRootAddress(int rank, const std::string& rootAddress, int64_t timeoutMs);

}  // namespace reccl::api
