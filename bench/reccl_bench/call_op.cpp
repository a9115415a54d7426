#include "call_op.h"

#include <array>
#include <cstddef>

#include "bench_data.h"
#include "reduce/reduce.h"

namespace reccl::bench {

CallOp::CallOp(recclRedOp_t op, recclDataType_t type, int rank, recclComm_t comm) : comm_(comm), op_(op) {
  if (op != reduce::kPreMulSum) return;
  std::array<std::byte, 8> scalar{};
  preMulScalar(type, rank, scalar.data());
  status_ = recclRedOpCreatePreMulSum(&op_, scalar.data(), type, recclScalarHostImmediate, comm);
  made_ = status_ == recclSuccess;
}

CallOp::~CallOp() {
  if (made_) (void)recclRedOpDestroy(op_, comm_);
}

}  // namespace reccl::bench
