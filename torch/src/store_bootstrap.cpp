#include "store_bootstrap.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <c10/util/Exception.h>

#include "comm_worker.h"
#include "reccl/common/params.h"

namespace reccl_torch {

namespace {

constexpr char kIdKey[] = "reccl_torch/unique_id";
// First byte of the stored value: the id follows, or rank 0's error message does (so the other
// ranks fail at once with it instead of waiting for the store's timeout).
constexpr uint8_t kIdFollows = 1;
constexpr uint8_t kErrorFollows = 0;

// The group's timeout bounds a communicator's init and each of its calls, as Gloo's and
// ProcessGroupNCCL's timeouts do: the config's bootstrap and collective deadlines. A
// RECCL_BOOTSTRAP_TIMEOUT_MS or RECCL_TIMEOUT_MS the user set holds instead, for every group.
// A lane's init waits for its peer's first matching message, which may come as late as an
// operation's timeout allows: its bootstrap deadline is the group's timeout whatever
// RECCL_BOOTSTRAP_TIMEOUT_MS says, and it is non-blocking, so that it can be given up.
recclConfig_t groupConfig(std::chrono::milliseconds timeout, bool lane) {
  const int ms = static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, INT_MAX));
  recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
  if (lane || std::getenv("RECCL_BOOTSTRAP_TIMEOUT_MS") == nullptr) cfg.bootstrapTimeoutMs = ms;
  if (std::getenv("RECCL_TIMEOUT_MS") == nullptr) cfg.timeoutMs = ms;
  if (lane) cfg.blocking = 0;
  return cfg;
}

// Makes a unique id and publishes it under `key`, or publishes why it could not (so the other
// ranks fail at once with it): "" or that reason ("reccl <what> (unique id) failed on rank ...").
std::string publishId(c10d::Store& store, const std::string& key, const std::string& what, int rank,
                      recclUniqueId* id) {
  recclResult_t r = recclGetUniqueId(id);
  std::string error;
  if (r != recclSuccess) error = describeFailure(what + " (unique id)", rank, r, recclGetLastError(nullptr));
  const char* body = r == recclSuccess ? id->internal : error.data();
  size_t bodySize = r == recclSuccess ? sizeof(id->internal) : error.size();
  std::vector<uint8_t> value(1 + bodySize);
  value[0] = r == recclSuccess ? kIdFollows : kErrorFollows;
  std::memcpy(value.data() + 1, body, bodySize);
  store.set(key, value);
  return error;
}

// `value` as rank `root` stored it: "" and `id` set, or why not (after "reccl: <what>: " in a
// message of its own).
std::string parseId(const std::vector<uint8_t>& value, int root, recclUniqueId* id) {
  if (value.empty()) return "rank " + std::to_string(root) + " published an empty unique id";
  if (value[0] == kErrorFollows)
    return "rank " + std::to_string(root) + " could not create the communicator: " +
           std::string(value.begin() + 1, value.end());
  if (value[0] != kIdFollows || value.size() != 1 + sizeof(id->internal))
    return "the store's unique id has " + std::to_string(value.size()) + " bytes, expected " +
           std::to_string(1 + sizeof(id->internal));
  std::copy(value.begin() + 1, value.end(), id->internal);
  return "";
}

// Polls for the id rank `root` publishes when it sends its first message here: "" and `id` set,
// or why not.
std::string awaitId(c10d::Store& store, const std::string& key, std::chrono::milliseconds timeout,
                    const GiveUp& giveUp, int root, recclUniqueId* id) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (!store.check({key})) {
    if (auto why = giveUp()) return *why + " while this waited for rank " + std::to_string(root);
    if (std::chrono::steady_clock::now() >= deadline)
      return "rank " + std::to_string(root) + " sent nothing to this rank within " + std::to_string(timeout.count()) +
             " ms (the process group's timeout)";
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  return parseId(store.get(key), root, id);
}

// openPairComm's work; raises (c10::Error) where the store does.
std::string openPairCommOrThrow(c10d::Store& store, const std::string& key, bool root, int rank, int rootRank,
                                std::chrono::milliseconds timeout, const GiveUp& giveUp, const std::string& what,
                                recclComm_t* comm) {
  recclUniqueId id{};
  if (root) {
    std::string error = publishId(store, key, what, rank, &id);
    if (!error.empty()) return error;
  } else {
    std::string why = awaitId(store, key, timeout, giveUp, rootRank, &id);
    if (!why.empty()) return failedOnRank(what, rank, why);
  }
  recclConfig_t cfg = groupConfig(timeout, /*lane=*/true);
  recclResult_t r = recclCommInitRankConfig(comm, 2, id, root ? 0 : 1, &cfg);
  if (r != recclSuccess && r != recclInProgress) return describeFailure(what, rank, r, recclGetLastError(nullptr));
  // The init's own deadline (the group's timeout) ends it; this only polls and gives up early.
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    recclResult_t state = recclInProgress;
    r = recclCommGetAsyncError(*comm, &state);
    if (r == recclSuccess && state == recclSuccess) return "";
    std::string error;
    if (r != recclSuccess || state != recclInProgress) {
      error = describeFailure(what, rank, r != recclSuccess ? r : state, recclGetLastError(nullptr));
    } else if (auto why = giveUp()) {
      error = failedOnRank(what, rank, *why + " while its communicator was made");
    }
    if (!error.empty()) {
      recclCommAbort(*comm);
      *comm = nullptr;
      return error;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(10));
  }
}

}  // namespace

recclComm_t initCommFromStore(c10d::Store& store, int rank, int size, std::chrono::milliseconds timeout) {
  // ceil(size / RECCL_RANKS_PER_ROOT) roots (recclCommInitRankScalable), root k's id made by the
  // first rank of its block; each creator publishes before it reads the others' ids.
  const int nroots = reccl::params::bootstrapRootsFor(size, 1024);
  // The first rank of block k, as reccl.h gives recclCommInitRankScalable's blocks.
  auto creatorOf = [&](int k) { return static_cast<int>(static_cast<int64_t>(k) * size / nroots); };
  auto keyOf = [&](int k) { return k == 0 ? std::string(kIdKey) : std::string(kIdKey) + "/" + std::to_string(k); };
  std::vector<recclUniqueId> ids(nroots);
  for (int k = 0; k < nroots; ++k)
    if (creatorOf(k) == rank) {
      std::string error = publishId(store, keyOf(k), "init", rank, &ids[k]);
      TORCH_CHECK(error.empty(), error);
    }
  for (int k = 0; k < nroots; ++k)
    if (creatorOf(k) != rank) {
      std::string error = parseId(store.get(keyOf(k)), creatorOf(k), &ids[k]);
      TORCH_CHECK(error.empty(), "reccl: init: ", error);
    }
  recclComm_t comm = nullptr;
  recclConfig_t cfg = groupConfig(timeout, /*lane=*/false);
  recclResult_t r = recclCommInitRankScalable(&comm, size, rank, nroots, ids.data(), &cfg);
  explicit_bzero(ids.data(), ids.size() * sizeof(recclUniqueId));  // each holds its root's key
  TORCH_CHECK(r == recclSuccess, describeFailure("init", rank, r, recclGetLastError(nullptr)));
  return comm;
}

std::string openPairComm(c10d::Store& store, const std::string& key, bool root, int rank, int rootRank,
                         std::chrono::milliseconds timeout, const GiveUp& giveUp, const std::string& what,
                         recclComm_t* comm) {
  *comm = nullptr;
  try {
    return openPairCommOrThrow(store, key, root, rank, rootRank, timeout, giveUp, what, comm);
  } catch (const c10::Error& e) {  // the store's: without libtorch's backtrace
    return failedOnRank(what, rank, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return failedOnRank(what, rank, e.what());
  }
}

}  // namespace reccl_torch
