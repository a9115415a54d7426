// What the backend accepts from torch: tensors, dtypes and reduce ops, mapped onto reccl's types.
// Every refusal raises (RuntimeError in Python) with a message naming the argument.
//
// Data movement (broadcast, all-gather, all-to-all, gather, scatter, send/recv) takes any dtype:
// the bytes move as they are. Reductions take the dtypes reccl has kernels for.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "reccl/reccl.hpp"

namespace reccl_torch {

// reccl's element type for a reduction over `t`; raises for dtypes reccl cannot reduce.
recclDataType_t reduceType(c10::ScalarType t);
// How data movement hands `t` to reccl: as elements of reccl's type for its dtype, so that a
// count or dtype that differs across ranks is named in the caller's terms; a dtype reccl has no
// type for (bool, int16, complex, ...) moves as bytes (uint8).
struct MoveUnits {
  recclDataType_t type;
  size_t count;
};
MoveUnits moveUnits(const at::Tensor& t);
// A reduction op as the caller's thread reads it: reccl's built-in op, or PREMUL_SUM with this
// rank's factor as one element of the collective's dtype (torch.distributed._make_nccl_premul_sum:
// a number, or a one-element tensor). Raises for ops reccl has no kernel for (bitwise ops).
struct ReduceOpArg {
  recclRedOp_t op = recclSum;
  bool preMul = false;
  std::array<std::byte, 8> factor{};
};
ReduceOpArg reduceOp(const c10d::ReduceOp& op, c10::ScalarType dtype);

// The op of one call on the worker, into *out: a PREMUL_SUM is made on `comm` for the call's
// dtype and destroyed with *out, after the call that used it returned.
recclResult_t callOp(const ReduceOpArg& arg, recclDataType_t type, recclComm_t comm, reccl::RedOp* out);

// A CPU, dense, contiguous tensor; `what` names the argument in the message.
void checkTensor(const at::Tensor& t, const char* what);
// The one tensor of a list (one device per process); checked as above.
const at::Tensor& singleTensor(const std::vector<at::Tensor>& tensors, const char* what);
// Every tensor of `list` has the dtype and element count of `like`.
void checkSameShape(const std::vector<at::Tensor>& list, const at::Tensor& like, const char* what);
// The one list (one device per process) of one tensor per rank, each shaped as `like`.
const std::vector<at::Tensor>& perRankList(const std::vector<std::vector<at::Tensor>>& lists, int size,
                                           const at::Tensor& like, const char* what);
// `whole` holds `size` times the elements of `part`, in its dtype (all-gather and
// reduce-scatter into or out of one tensor); both checked as by checkTensor.
void checkWholeAndPart(const at::Tensor& whole, const char* wholeName, const at::Tensor& part, const char* partName,
                       int size);
// `t` has the dtype of `like` (the input).
void checkSameDtype(const at::Tensor& t, const at::Tensor& like, const char* what);
// A rank given by the caller (root, peer) lies in [0, size).
int checkRank(int64_t rank, int size, const char* what);

inline size_t byteCount(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }
inline void* bytes(const at::Tensor& t) { return t.data_ptr(); }

}  // namespace reccl_torch
