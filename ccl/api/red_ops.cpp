#include "api/red_ops.h"

#include <cstring>
#include <string>

#include "reduce/reduce.h"

namespace reccl::api {

const RedOpTable::PreMulSum* RedOpTable::find(int op) const {
  if (op < recclNumOps) return nullptr;
  const auto slot = static_cast<size_t>(op - recclNumOps);
  return slot < ops_.size() && ops_[slot] ? &*ops_[slot] : nullptr;
}

Result<recclRedOp_t> RedOpTable::createPreMulSum(const void* scalar, recclDataType_t dtype, int residence) {
  if (!scalar) return Status(Errc::kInvalidArgument, "scalar: null pointer");
  if (residence != recclScalarDevice && residence != recclScalarHostImmediate)
    return Status(Errc::kInvalidArgument, "residence: unknown value " + std::to_string(residence) +
                                              " (recclScalarDevice or recclScalarHostImmediate)");
  PreMulSum op;
  op.dtype = dtype;
  if (residence == recclScalarHostImmediate)
    std::memcpy(op.scalar.value.data(), scalar, reduce::typeSize(dtype));
  else
    op.scalar.at = scalar;
  std::lock_guard lk(mu_);
  size_t slot = 0;
  while (slot < ops_.size() && ops_[slot]) ++slot;
  if (slot == kMaxOps)
    return Status(Errc::kInvalidUsage, "op: this communicator holds " + std::to_string(kMaxOps) +
                                           " reduction ops already (recclRedOpDestroy frees them)");
  if (slot == ops_.size()) ops_.emplace_back();
  ops_[slot] = op;
  return static_cast<recclRedOp_t>(recclNumOps + static_cast<int>(slot));
}

Status RedOpTable::destroy(int op) {
  if (op >= 0 && op < recclNumOps)
    return Status(Errc::kInvalidArgument, "op: " + std::string(reduce::opName(static_cast<recclRedOp_t>(op))) +
                                              " is built in, not made by recclRedOpCreatePreMulSum");
  std::lock_guard lk(mu_);
  if (!find(op))
    return Status(Errc::kInvalidArgument, "op: " + std::to_string(op) + " is no live op of this communicator");
  ops_[static_cast<size_t>(op - recclNumOps)].reset();
  return Status::Ok();
}

Result<recclRedOp_t> RedOpTable::resolve(int op, recclDataType_t dtype, algo::Collective::PreMul* pre) const {
  if (reduce::validOp(op)) return static_cast<recclRedOp_t>(op);
  std::lock_guard lk(mu_);
  const PreMulSum* found = find(op);
  if (!found)
    return Status(Errc::kInvalidArgument, "op: unknown value " + std::to_string(op) +
                                              " (not built in, and no live op made on this communicator)");
  const PreMulSum& p = *found;
  if (p.dtype != dtype)
    return Status(Errc::kInvalidArgument, "op: " + std::to_string(op) + " is a premulsum of " +
                                              reduce::typeName(p.dtype) + ", the call's datatype is " +
                                              reduce::typeName(dtype));
  *pre = p.scalar;
  return reduce::kPreMulSum;
}

}  // namespace reccl::api
