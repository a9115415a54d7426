// The reduction ops one communicator's handle made (recclRedOpCreatePreMulSum): their values start
// at recclNumOps, one slot each, a freed slot's value handed out again. The C API checks every
// call's op here and fills the collective's PreMulSum scalar from it.
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

#include "algo/collective.h"
#include "reccl/common/status.h"
#include "reccl/reccl.h"

namespace reccl::api {

class RedOpTable {
 public:
  // Live ops one communicator may hold at once (NCCL's limit is memory; this keeps a runaway
  // loop that never destroys from growing without bound).
  static constexpr size_t kMaxOps = 1u << 16;

  // A PreMulSum of `dtype` whose scalar is `scalar` (copied now for recclScalarHostImmediate,
  // read at each run for recclScalarDevice). `residence` as the caller's int: any value is
  // checked before it becomes the enum.
  Result<recclRedOp_t> createPreMulSum(const void* scalar, recclDataType_t dtype, int residence);
  Status destroy(int op);
  // A call's op for a collective of `dtype`: a built-in one as it is, one of this table's as
  // reduce::kPreMulSum with its scalar in *pre; kInvalidArgument naming the problem otherwise.
  Result<recclRedOp_t> resolve(int op, recclDataType_t dtype, algo::Collective::PreMul* pre) const;

 private:
  struct PreMulSum {
    recclDataType_t dtype = recclFloat32;
    algo::Collective::PreMul scalar;  // `at` set: recclScalarDevice
  };
  // The live op `op` names, or nullptr (mu_ held).
  const PreMulSum* find(int op) const;
  mutable std::mutex mu_;
  std::vector<std::optional<PreMulSum>> ops_;  // slot i is op recclNumOps + i
};

}  // namespace reccl::api
