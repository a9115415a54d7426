// The op one row's (or the fault loop's) calls take, into *out: a built-in op as it is; mulsum
// (reduce::kPreMulSum) as a PreMulSum made on the communicator with this rank's scalar
// (bench_data.h: preMulScalar) for the calls' datatype, destroyed with *out.
#pragma once

#include "reccl/reccl.hpp"

namespace reccl::bench {

recclResult_t callOp(recclRedOp_t op, recclDataType_t type, int rank, recclComm_t comm, RedOp* out);

}  // namespace reccl::bench
