// The op one row's (or the fault loop's) calls take: a built-in op as it is; mulsum
// (reduce::kPreMulSum) as a PreMulSum op made on the communicator with this rank's scalar
// (bench_data.h: preMulScalar), for the calls' datatype, and destroyed with this object.
#pragma once

#include "reccl/reccl.h"

namespace reccl::bench {

class CallOp {
 public:
  CallOp(recclRedOp_t op, recclDataType_t type, int rank, recclComm_t comm);
  ~CallOp();
  CallOp(const CallOp&) = delete;
  CallOp& operator=(const CallOp&) = delete;
  recclResult_t status() const { return status_; }  // of making a mulsum's op
  recclRedOp_t op() const { return op_; }

 private:
  recclComm_t comm_;
  recclRedOp_t op_;
  bool made_ = false;
  recclResult_t status_ = recclSuccess;
};

}  // namespace reccl::bench
