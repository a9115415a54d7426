// nccl-tests' JSON output (-J, its file version 3): the same keys in the same order and the same
// kinds of values (booleans as the strings "true"/"false", the root as its 6-wide text), so what
// reads nccl-tests' files reads reccl-bench's. Extra keys it adds: "collective" in each result
// (a run may hold several) and "reccl_version"; "nccl_version" holds reccl's version code.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench_options.h"
#include "bench_table.h"
#include "reccl/common/status.h"

namespace reccl::bench {

struct DeviceInfo {
  int rank = 0;
  int group = 0;
  int pid = 0;
  std::string hostname;
  int device = 0;
  std::string info;
};

struct NcclTestsRun {
  std::vector<std::string> args;
  std::vector<std::string> env;  // "NAME=value"; secrets are hidden by ncclTestsJson
  int version = 0;               // recclGetVersion
  std::string startTime, endTime;  // "%Y-%m-%d %H:%M:%S", local time
  std::vector<DeviceInfo> devices;
  std::vector<Row> rows;
  int64_t outOfBounds = 0;
  double avgBusBw = 0;
  double minBusBw = -1;  // NCCL_TESTS_MIN_BW; < 0: unchecked
  std::vector<std::string> errors;
};

nlohmann::ordered_json ncclTestsJson(const BenchOptions& o, const NcclTestsRun& run);

// nccl-tests opens its file exclusively, and when it exists tries path.0, path.1, ...; the path
// taken, or why none could be.
Result<std::string> writeExclusive(const std::string& path, const std::string& text);

// Now as nccl-tests stamps its records.
std::string localTimestamp();

}  // namespace reccl::bench
