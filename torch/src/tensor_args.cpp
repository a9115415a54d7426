#include "tensor_args.h"

#include <cstring>
#include <optional>

#include <c10/util/Exception.h>

namespace reccl_torch {

namespace {
std::optional<recclDataType_t> recclType(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Char: return recclInt8;
    case c10::ScalarType::Byte: return recclUint8;
    case c10::ScalarType::Int: return recclInt32;
    case c10::ScalarType::Long: return recclInt64;
    case c10::ScalarType::Half: return recclFloat16;
    case c10::ScalarType::BFloat16: return recclBfloat16;
    case c10::ScalarType::Float: return recclFloat32;
    case c10::ScalarType::Double: return recclFloat64;
    default: return std::nullopt;
  }
}
}  // namespace

recclDataType_t reduceType(c10::ScalarType t) {
  auto type = recclType(t);
  TORCH_CHECK(type, "reccl: dtype: reccl cannot reduce ", t,
              " (reductions take float32, float64, float16, bfloat16, int8, uint8, int32, int64)");
  return *type;
}

MoveUnits moveUnits(const at::Tensor& t) {
  if (auto type = recclType(t.scalar_type())) return {*type, static_cast<size_t>(t.numel())};
  return {recclUint8, byteCount(t)};
}

ReduceOpArg reduceOp(const c10d::ReduceOp& op, c10::ScalarType dtype) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return {recclSum};
    case c10d::ReduceOp::PRODUCT: return {recclProd};
    case c10d::ReduceOp::MIN: return {recclMin};
    case c10d::ReduceOp::MAX: return {recclMax};
    case c10d::ReduceOp::AVG: return {recclAvg};
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(sup, "reccl: op: ReduceOp.PREMUL_SUM without its factor (make it with "
                       "torch.distributed._make_nccl_premul_sum)");
      at::Tensor f;
      if (sup->tensor_factors.empty()) {
        f = at::scalar_tensor(sup->double_factor, at::TensorOptions().dtype(dtype));
      } else {
        TORCH_CHECK(sup->tensor_factors.size() == 1, "reccl: op: ReduceOp.PREMUL_SUM: one factor tensor per process, got ",
                    sup->tensor_factors.size());
        const at::Tensor& t = sup->tensor_factors[0];
        TORCH_CHECK(t.device().is_cpu() && t.numel() == 1,
                    "reccl: op: ReduceOp.PREMUL_SUM: the factor tensor must be one element on the CPU, got ", t.numel(),
                    " on ", t.device());
        f = t.to(dtype).contiguous();
      }
      ReduceOpArg arg{recclSum, true, {}};
      std::memcpy(arg.factor.data(), f.data_ptr(), f.element_size());
      return arg;
    }
    default: break;
  }
  const char* name = op.op_ == c10d::ReduceOp::BAND  ? "BAND"
                     : op.op_ == c10d::ReduceOp::BOR  ? "BOR"
                     : op.op_ == c10d::ReduceOp::BXOR ? "BXOR"
                                                      : "(unknown)";
  TORCH_CHECK(false, "reccl: op: ReduceOp.", name,
              " is not supported (reccl reduces with SUM, PRODUCT, MIN, MAX, AVG and PREMUL_SUM)");
}

recclResult_t callOp(const ReduceOpArg& arg, recclDataType_t type, recclComm_t comm, reccl::RedOp* out) {
  if (!arg.preMul) {
    *out = reccl::RedOp(arg.op);
    return recclSuccess;
  }
  return reccl::RedOp::preMulSum(out, arg.factor.data(), type, comm);
}

void checkTensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), "reccl: ", what, ": undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "reccl: ", what, ": must be a CPU tensor, got one on ", t.device());
  TORCH_CHECK(t.layout() == c10::kStrided, "reccl: ", what, ": must be a dense tensor, got layout ", t.layout());
  TORCH_CHECK(t.is_contiguous(), "reccl: ", what, ": must be contiguous");
}

const at::Tensor& singleTensor(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "reccl: ", what, ": expected exactly one tensor (one device per process), got ",
              tensors.size());
  checkTensor(tensors[0], what);
  return tensors[0];
}

void checkSameShape(const std::vector<at::Tensor>& list, const at::Tensor& like, const char* what) {
  for (size_t i = 0; i < list.size(); ++i) {
    checkTensor(list[i], what);
    checkSameDtype(list[i], like, what);
    TORCH_CHECK(list[i].numel() == like.numel(), "reccl: ", what, "[", i, "]: ", list[i].numel(),
                " elements, the input has ", like.numel());
  }
}

const std::vector<at::Tensor>& perRankList(const std::vector<std::vector<at::Tensor>>& lists, int size,
                                           const at::Tensor& like, const char* what) {
  TORCH_CHECK(lists.size() == 1, "reccl: ", what, ": expected one list (one device per process), got ", lists.size());
  TORCH_CHECK(static_cast<int>(lists[0].size()) == size, "reccl: ", what, ": expected ", size,
              " tensors (one per rank), got ", lists[0].size());
  checkSameShape(lists[0], like, what);
  return lists[0];
}

void checkSameDtype(const at::Tensor& t, const at::Tensor& like, const char* what) {
  TORCH_CHECK(t.scalar_type() == like.scalar_type(), "reccl: ", what, ": dtype ", t.scalar_type(),
              " differs from the input's ", like.scalar_type());
}

void checkWholeAndPart(const at::Tensor& whole, const char* wholeName, const at::Tensor& part, const char* partName,
                       int size) {
  checkTensor(whole, wholeName);
  checkTensor(part, partName);
  checkSameDtype(whole, part, wholeName);
  TORCH_CHECK(whole.numel() == part.numel() * size, "reccl: ", wholeName, ": ", whole.numel(), " elements, expected ",
              size, " x ", partName, " = ", part.numel() * size);
}

int checkRank(int64_t rank, int size, const char* what) {
  TORCH_CHECK(rank >= 0 && rank < size, "reccl: ", what, ": ", rank, " is not a rank of this group [0, ", size, ")");
  return static_cast<int>(rank);
}

}  // namespace reccl_torch
