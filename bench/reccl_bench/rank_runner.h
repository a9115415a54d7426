// One rank of a reccl-bench run: for every collective, type, op, root and size it times the
// out-of-place and in-place calls as nccl-tests does (warm-up, barrier, -n iterations of -m
// calls, -z barriers, the time reduced over ranks as -a says, -I per-iteration samples), checks
// the results (-c), and on rank 0 prints the table and collects the rows.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench_data.h"
#include "bench_options.h"
#include "bench_report.h"
#include "bench_table.h"
#include "nccl_tests_json.h"
#include "reccl/reccl.h"

namespace reccl::bench {

struct FreeDeleter {
  void operator()(void* p) const noexcept;
};
using Buffer = std::unique_ptr<unsigned char, FreeDeleter>;

class RankRunner {
 public:
  // report: rank 0's (prints and collects), nullptr on the others. processes: whether ranks are
  // processes (one per launcher task) rather than threads of this one.
  RankRunner(const BenchOptions& o, recclComm_t comm, int rank, int nranks, bool processes, Report* report)
      : o_(o), comm_(comm), rank_(rank), nranks_(nranks), processes_(processes), report_(report) {}

  // false when a call failed; the message is in error().
  bool run();
  const std::string& error() const { return error_; }
  // Wrong elements over all ranks and rows (every rank knows it: the counts are allreduced).
  int64_t wrongTotal() const { return wrongTotal_; }
  // Every rank's pid and host, gathered by run() (rank 0 only).
  const std::vector<DeviceInfo>& devices() const { return devices_; }

 private:
  bool fail(std::string msg);
  bool callFailed(const char* what, recclResult_t r);
  bool gatherDevices();
  recclResult_t issue(Coll c, const void* send, void* recv, const Shape& s, recclDataType_t t, recclRedOp_t op,
                      int root);
  void prepare(Coll c, const DataSpec& d, const Shape& s, bool inPlace, const void** send, void** recv);
  bool reduceTime(double* us);
  bool perIteration(std::vector<double> iterUs, IterStats* out);
  bool checkRow(Coll c, const DataSpec& d, const Shape& s, bool inPlace, int64_t* wrong);
  bool timeOne(Coll c, const DataSpec& d, const Shape& s, bool inPlace, Timing* out);
  bool runRow(Coll c, recclDataType_t t, recclRedOp_t op, int root, int64_t bytes);

  const BenchOptions& o_;
  recclComm_t comm_;
  int rank_, nranks_;
  bool processes_;
  Report* report_;
  Buffer send_, recv_;
  recclRedOp_t callOp_ = recclSum;  // the op of the row being run (runRow)
  std::vector<DeviceInfo> devices_;
  std::string error_;
  int64_t wrongTotal_ = 0;
};

}  // namespace reccl::bench
