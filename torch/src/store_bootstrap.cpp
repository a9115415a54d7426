#include "store_bootstrap.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <c10/util/Exception.h>

#include "comm_worker.h"

namespace reccl_torch {

namespace {

constexpr char kIdKey[] = "reccl_torch/unique_id";
// First byte of the stored value: the id follows, or rank 0's error message does (so the other
// ranks fail at once with it instead of waiting for the store's timeout).
constexpr uint8_t kIdFollows = 1;
constexpr uint8_t kErrorFollows = 0;

// The group's timeout bounds this communicator's init and each of its calls, as Gloo's and
// ProcessGroupNCCL's timeouts do: the config's bootstrap and collective deadlines. A
// RECCL_BOOTSTRAP_TIMEOUT_MS or RECCL_TIMEOUT_MS the user set holds instead, for every group.
recclResult_t initRankWithTimeout(recclComm_t* comm, int size, const recclUniqueId& id, int rank,
                                  std::chrono::milliseconds timeout) {
  const int ms = static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, INT_MAX));
  recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
  if (std::getenv("RECCL_BOOTSTRAP_TIMEOUT_MS") == nullptr) cfg.bootstrapTimeoutMs = ms;
  if (std::getenv("RECCL_TIMEOUT_MS") == nullptr) cfg.timeoutMs = ms;
  return recclCommInitRankConfig(comm, size, id, rank, &cfg);
}

recclUniqueId publishId(c10d::Store& store) {
  recclUniqueId id{};
  recclResult_t r = recclGetUniqueId(&id);
  std::string error;
  if (r != recclSuccess) error = describeFailure("init (unique id)", 0, r, recclGetLastError(nullptr));
  const char* body = r == recclSuccess ? id.internal : error.data();
  size_t bodySize = r == recclSuccess ? sizeof(id.internal) : error.size();
  std::vector<uint8_t> value(1 + bodySize);
  value[0] = r == recclSuccess ? kIdFollows : kErrorFollows;
  std::memcpy(value.data() + 1, body, bodySize);
  store.set(kIdKey, value);
  TORCH_CHECK(r == recclSuccess, error);
  return id;
}

recclUniqueId readId(c10d::Store& store) {
  std::vector<uint8_t> value = store.get(kIdKey);
  TORCH_CHECK(!value.empty(), "reccl: init: rank 0 published an empty unique id");
  if (value[0] == kErrorFollows)
    TORCH_CHECK(false, "reccl: init: rank 0 could not create the communicator: ",
                std::string(value.begin() + 1, value.end()));
  recclUniqueId id{};
  TORCH_CHECK(value[0] == kIdFollows && value.size() == 1 + sizeof(id.internal),
              "reccl: init: the store's unique id has ", value.size(), " bytes, expected ", 1 + sizeof(id.internal));
  std::copy(value.begin() + 1, value.end(), id.internal);
  return id;
}

}  // namespace

recclComm_t initCommFromStore(c10d::Store& store, int rank, int size, std::chrono::milliseconds timeout) {
  recclUniqueId id = rank == 0 ? publishId(store) : readId(store);
  recclComm_t comm = nullptr;
  recclResult_t r = initRankWithTimeout(&comm, size, id, rank, timeout);
  TORCH_CHECK(r == recclSuccess, describeFailure("init", rank, r, recclGetLastError(nullptr)));
  return comm;
}

}  // namespace reccl_torch
