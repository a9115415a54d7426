// Creates a process group's communicator the way ProcessGroupNCCL does: rank 0 makes a unique id
// (a random secret and communicator id, its bootstrap root listening) and publishes it in the
// group's c10d store; the other ranks read it there and all call recclCommInitRank. A group
// larger than RECCL_RANKS_PER_ROOT (128) bootstraps over several roots, as ProcessGroupNCCL's
// TORCH_NCCL_RANKS_PER_ROOT: the first rank of each block makes and publishes one, every rank
// reads them all and calls recclCommInitRankScalable. The store
// torch hands the backend is already private to the group, so nothing else is needed from the
// environment.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "reccl/reccl.h"

namespace reccl_torch {

// Raises (c10::Error) with reccl's message when rank 0 could not make the id or any rank could
// not join. `timeout` becomes the communicator's bootstrap and collective deadlines (its
// recclConfig_t) unless the user set RECCL_BOOTSTRAP_TIMEOUT_MS / RECCL_TIMEOUT_MS.
recclComm_t initCommFromStore(c10d::Store& store, int rank, int size, std::chrono::milliseconds timeout);

// Why a lane's opening should end early (the group failed, or its communicator did), or nothing.
using GiveUp = std::function<std::optional<std::string>()>;

// The same for a two-rank communicator under `key`, made on a lane's worker thread
// (p2p_lanes.h): the root publishes, the other rank polls the store rather than blocking in it
// (a blocking get holds TCPStore's lock, which the group's other lanes need), and the init is
// non-blocking, so either side stops waiting once `giveUp()` says why. Both wait at most
// `timeout` for the other. `rank` and `rootRank` are group ranks, for messages, as is `what`
// ("send to rank 2"). Returns "" or what failed (never raises).
std::string openPairComm(c10d::Store& store, const std::string& key, bool root, int rank, int rootRank,
                         std::chrono::milliseconds timeout, const GiveUp& giveUp, const std::string& what,
                         recclComm_t* comm);

}  // namespace reccl_torch
