// LD_PRELOAD shim for reccl_bench_test: forwards recclAllReduce to the real library, then flips
// the sign of element 0 of a float result with more than one element, so the test can show that
// reccl-bench counts wrong elements and fails. The 1-element time and wrong-count reductions
// pass untouched.
#include <dlfcn.h>

#include <cstring>

#include "reccl/reccl.h"

extern "C" recclResult_t recclAllReduce(const void* sendbuff, void* recvbuff, size_t count, recclDataType_t datatype,
                                        recclRedOp_t op, recclComm_t comm, recclStream_t stream) {
  using Fn = recclResult_t (*)(const void*, void*, size_t, recclDataType_t, recclRedOp_t, recclComm_t, recclStream_t);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "recclAllReduce"));
  if (!real) return recclInternalError;
  recclResult_t r = real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  if (r == recclSuccess && datatype == recclFloat32 && count > 1) {
    float v;
    std::memcpy(&v, recvbuff, sizeof v);
    v = -v - 1.0f;
    std::memcpy(recvbuff, &v, sizeof v);
  }
  return r;
}
