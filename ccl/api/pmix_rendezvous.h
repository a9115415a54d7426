// The bootstrap roots' addresses handed to every rank through the launcher's own PMIx server (Open
// MPI's mpirun, PRRTE's prterun, Slurm's srun --mpi=pmix): each root's rank puts its own, every
// rank joins a fence of the job's namespace and gets the others'. The data stays inside the launcher's job.
// libpmix is loaded at run time, so libreccl needs it only where a launcher offers PMIx.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reccl/common/status.h"

namespace reccl::api {

// `rank` is this process's rank as the launcher's environment gave it (PMIx must agree);
// `rootRanks` the ranks that started a bootstrap root (rank 0; with several roots, the first rank
// of each block), the same on every rank; `mine` this rank's root's "a.b.c.d:port" when it is one
// of them (others pass ""). Returns every root's address, in rootRanks' order, on every rank, or
// an error within timeoutMs (a rank that never arrives fails the fence).
Result<std::vector<std::string>> pmixShareRootAddresses(int rank, const std::vector<int>& rootRanks,
                                                        const std::string& mine, int64_t timeoutMs);

}  // namespace reccl::api
