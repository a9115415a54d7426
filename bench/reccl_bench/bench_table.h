// nccl-tests' result table: the same column layout, number formats and footer lines, so tools
// that read all_reduce_perf output read reccl-bench's too; and the same rows as JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "collective.h"
#include "reccl/reccl.h"

namespace reccl::bench {

struct Timing {
  double timeUs = 0;   // average per iteration of the slowest rank
  double algBw = 0;    // GB/s (1e9 bytes)
  double busBw = 0;    // GB/s
  int64_t wrong = -1;  // wrong elements over all ranks; -1: not checked
};

struct Row {
  Coll coll = Coll::kAllReduce;
  int64_t bytes = 0;  // the size column: count * element size
  size_t count = 0;
  recclDataType_t type = recclFloat32;
  std::optional<recclRedOp_t> op;  // none for collectives without a reduction
  int root = -1;                   // -1 for collectives without a root
  std::optional<Timing> outOfPlace;  // none where the implementation has no out-of-place form
  std::optional<Timing> inPlace;     // none where the collective has no in-place form
};

// algbw and busbw from bytes and time, nccl-tests' definitions.
Timing makeTiming(Coll c, int64_t bytes, double timeUs, int nranks, int64_t wrong);

// "#   nThread ... " style first line describing the run.
std::string formatRunLine(int nranks, int threads, int64_t minBytes, int64_t maxBytes, double stepFactor,
                          int64_t stepBytes, int warmup, int iters, bool check);
std::string formatColumnHeader();  // the three '#' header lines
std::string formatRow(const Row& r);
std::string formatFooter(int64_t outOfBounds, double avgBusBw);

nlohmann::json rowJson(const Row& r);

}  // namespace reccl::bench
