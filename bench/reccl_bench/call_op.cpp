#include "call_op.h"

#include <array>
#include <cstddef>

#include "bench_data.h"
#include "reduce/reduce.h"

namespace reccl::bench {

recclResult_t callOp(recclRedOp_t op, recclDataType_t type, int rank, recclComm_t comm, RedOp* out) {
  if (op != reduce::kPreMulSum) {
    *out = RedOp(op);
    return recclSuccess;
  }
  std::array<std::byte, 8> scalar{};
  preMulScalar(type, rank, scalar.data());
  return RedOp::preMulSum(out, scalar.data(), type, comm);
}

}  // namespace reccl::bench
