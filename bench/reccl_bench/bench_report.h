// What a benchmark run collects for its footer and its --json file: rows, wrong-element total,
// average bus bandwidth, the first error, and a description of the environment. Shared by
// reccl-bench and the Gloo peer so both write the same records.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "bench_options.h"
#include "bench_table.h"

namespace reccl::bench {

struct Report {
  std::vector<nlohmann::json> rows;
  std::vector<Row> table;  // the same rows, for nccl-tests' JSON
  int64_t wrongTotal = 0;
  double busBwSum = 0;
  int busBwCount = 0;
  std::string error;  // first failure, if any

  // Adds a printed row; `extra` fields (e.g. {"algo": "ring"}) are merged into its record.
  void add(const Row& r, const nlohmann::json& extra = nlohmann::json::object());
  // nccl-tests' footer figure: the mean of every busbw printed (out-of-place and in-place).
  double avgBusBw() const { return busBwCount ? busBwSum / busBwCount : 0.0; }
  bool ok() const { return error.empty() && wrongTotal == 0; }
};

// Host, pid, UTC date, ranks, argv, CPU count, the reduction ISA and every RECCL_* and launcher
// variable (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
nlohmann::json environmentJson(const BenchOptions& o, int nranks);

// {"tool", "environment", "rows", "out_of_bounds", "avg_busbw_gbps", "status", "error"?}.
// false (with a message on stderr) when the file cannot be written.
bool writeReportJson(const std::string& path, const std::string& tool, const nlohmann::json& environment,
                     const Report& report);

}  // namespace reccl::bench
