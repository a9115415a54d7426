// The collectives reccl has a call for. Arguments are checked in the caller's thread; the lambdas
// run on the worker and hold the tensors (by reference count) until then.
#include <cstring>
#include <memory>

#include "process_group_reccl.h"
#include "tensor_args.h"

namespace reccl_torch {

namespace {

void checkRootTensor(int64_t rootTensor) {
  TORCH_CHECK(rootTensor == 0, "reccl: rootTensor: must be 0 (one tensor per process), got ", rootTensor);
}

// A buffer for what reccl needs in one piece when torch hands a list of tensors.
std::unique_ptr<std::byte[]> staging(size_t n) { return std::unique_ptr<std::byte[]>(new std::byte[n ? n : 1]); }

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  at::Tensor t = singleTensor(tensors, "tensors");
  checkRootTensor(opts.rootTensor);
  int root = checkRank(opts.rootRank, size_, "rootRank");
  return submit(c10d::OpType::BROADCAST, "broadcast", {t}, opts.timeout, [t, root](recclComm_t comm) {
    MoveUnits u = moveUnits(t);
    return recclBroadcast(bytes(t), bytes(t), u.count, u.type, root, comm, nullptr);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  at::Tensor t = singleTensor(tensors, "tensors");
  recclDataType_t type = reduceType(t.scalar_type());
  ReduceOpArg op = reduceOp(opts.reduceOp, t.scalar_type());
  return submit(c10d::OpType::ALLREDUCE, "allreduce", {t}, opts.timeout, [t, type, op](recclComm_t comm) {
    reccl::RedOp o;
    if (recclResult_t r = callOp(op, type, comm, &o); r != recclSuccess) return r;
    return recclAllReduce(bytes(t), bytes(t), static_cast<size_t>(t.numel()), type, o.get(), comm, nullptr);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "reccl: tensors: allreduce_coalesced needs at least one tensor");
  for (const auto& t : tensors) checkTensor(t, "tensors");
  for (const auto& t : tensors)
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(), "reccl: tensors: allreduce_coalesced needs one dtype, got ",
                tensors[0].scalar_type(), " and ", t.scalar_type());
  recclDataType_t type = reduceType(tensors[0].scalar_type());
  ReduceOpArg op = reduceOp(opts.reduceOp, tensors[0].scalar_type());
  // One allreduce over the tensors laid end to end.
  return submit(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors, opts.timeout,
                [ts = tensors, type, op](recclComm_t comm) {
                  size_t total = 0;
                  for (const auto& t : ts) total += byteCount(t);
                  auto buf = staging(total);
                  size_t off = 0;
                  for (const auto& t : ts) std::memcpy(buf.get() + off, bytes(t), byteCount(t)), off += byteCount(t);
                  size_t count = total / ts[0].element_size();
                  reccl::RedOp o;
                  if (recclResult_t r = callOp(op, type, comm, &o); r != recclSuccess) return r;
                  recclResult_t r = recclAllReduce(buf.get(), buf.get(), count, type, o.get(), comm, nullptr);
                  if (r != recclSuccess) return r;
                  off = 0;
                  for (const auto& t : ts) std::memcpy(bytes(t), buf.get() + off, byteCount(t)), off += byteCount(t);
                  return r;
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  at::Tensor t = singleTensor(tensors, "tensors");
  checkRootTensor(opts.rootTensor);
  int root = checkRank(opts.rootRank, size_, "rootRank");
  recclDataType_t type = reduceType(t.scalar_type());
  ReduceOpArg op = reduceOp(opts.reduceOp, t.scalar_type());
  return submit(c10d::OpType::REDUCE, "reduce", {t}, opts.timeout, [t, type, op, root](recclComm_t comm) {
    reccl::RedOp o;
    if (recclResult_t r = callOp(op, type, comm, &o); r != recclSuccess) return r;
    return recclReduce(bytes(t), bytes(t), static_cast<size_t>(t.numel()), type, o.get(), root, comm, nullptr);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& opts) {
  at::Tensor in = singleTensor(inputs, "input_tensor");
  const auto& outs = perRankList(outputs, size_, in, "tensor_list");
  return submit(c10d::OpType::ALLGATHER, "allgather", outs, opts.timeout, [in, outs](recclComm_t comm) {
    size_t n = byteCount(in);
    MoveUnits u = moveUnits(in);
    auto buf = staging(n * outs.size());
    recclResult_t r = recclAllGather(bytes(in), buf.get(), u.count, u.type, comm, nullptr);
    if (r != recclSuccess) return r;
    for (size_t i = 0; i < outs.size(); ++i) std::memcpy(bytes(outs[i]), buf.get() + i * n, n);
    return r;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions& opts) {
  checkWholeAndPart(output, "output_tensor", input, "input_tensor", size_);
  at::Tensor in = input, out = output;
  return submit(c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", {out}, opts.timeout,
                [in, out](recclComm_t comm) {
                  MoveUnits u = moveUnits(in);
                  return recclAllGather(bytes(in), bytes(out), u.count, u.type, comm, nullptr);
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = singleTensor(outputs, "output");
  const auto& ins = perRankList(inputs, size_, out, "input_list");
  recclDataType_t type = reduceType(out.scalar_type());
  ReduceOpArg op = reduceOp(opts.reduceOp, out.scalar_type());
  return submit(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", {out}, opts.timeout,
                [out, ins, type, op](recclComm_t comm) {
                  size_t n = byteCount(out);
                  auto buf = staging(n * ins.size());
                  for (size_t i = 0; i < ins.size(); ++i) std::memcpy(buf.get() + i * n, bytes(ins[i]), n);
                  reccl::RedOp o;
                  if (recclResult_t r = callOp(op, type, comm, &o); r != recclSuccess) return r;
                  return recclReduceScatter(buf.get(), bytes(out), static_cast<size_t>(out.numel()), type, o.get(),
                                            comm, nullptr);
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  checkWholeAndPart(input, "input", output, "output", size_);
  recclDataType_t type = reduceType(output.scalar_type());
  ReduceOpArg op = reduceOp(opts.reduceOp, output.scalar_type());
  at::Tensor in = input, out = output;
  return submit(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", {out}, opts.timeout,
                [in, out, type, op](recclComm_t comm) {
                  reccl::RedOp o;
                  if (recclResult_t r = callOp(op, type, comm, &o); r != recclSuccess) return r;
                  return recclReduceScatter(bytes(in), bytes(out), static_cast<size_t>(out.numel()), type, o.get(),
                                            comm, nullptr);
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::barrier(const c10d::BarrierOptions& opts) {
  return submit(c10d::OpType::BARRIER, "barrier", {}, opts.timeout,
                [](recclComm_t comm) { return recclBarrier(comm, nullptr); });
}

}  // namespace reccl_torch
