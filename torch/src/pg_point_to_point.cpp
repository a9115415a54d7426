// Send/recv and what is built from reccl groups of them. reccl matches the messages between two
// ranks in the order they were issued (no tags). send/recv go on the lanes (p2p_lanes.h), so a
// message never waits for one in another direction; the collectives made of sends and receives
// go on the group's communicator as one reccl group, which issues them together.
#include <numeric>

#include "process_group_reccl.h"
#include "tensor_args.h"

namespace reccl_torch {

namespace {

// Row offsets along dim 0 for split sizes (empty: equal splits); checks they cover the tensor.
std::vector<int64_t> splitOffsets(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                                  std::vector<int64_t>* lengths, const char* what) {
  int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "reccl: ", what, ": ", rows, " rows do not split evenly over ", size, " ranks");
    lengths->assign(size, rows / size);
  } else {
    TORCH_CHECK(static_cast<int>(splits.size()) == size, "reccl: ", what, "_split_sizes: expected ", size,
                " sizes, got ", splits.size());
    for (int64_t s : splits) TORCH_CHECK(s >= 0, "reccl: ", what, "_split_sizes: negative size ", s);
    int64_t sum = std::accumulate(splits.begin(), splits.end(), int64_t{0});
    TORCH_CHECK(sum == rows, "reccl: ", what, "_split_sizes: sum to ", sum, ", the tensor has ", rows, " rows");
    *lengths = splits;
  }
  std::vector<int64_t> offsets(size, 0);
  for (int p = 1; p < size; ++p) offsets[p] = offsets[p - 1] + (*lengths)[p - 1];
  return offsets;
}

at::Tensor rows(const at::Tensor& t, int64_t offset, int64_t length) {
  return t.dim() == 0 ? t : t.narrow(0, offset, length);
}

// The message on its lane's two-rank communicator.
CommOp::Call laneCall(PeerOp op) {
  return [op = std::move(op)](recclComm_t comm) {
    const size_t n = byteCount(op.tensor);
    const int peer = PeerLanes::peerInLane(op.isSend);
    return op.isSend ? recclSend(bytes(op.tensor), n, recclUint8, peer, comm, nullptr)
                     : recclRecv(bytes(op.tensor), n, recclUint8, peer, comm, nullptr);
  };
}

void checkTag(int tag) {
  TORCH_CHECK(tag == 0, "reccl: tag: ", tag,
              " is not supported (reccl matches the messages between two ranks in the order they were sent; use tag 0)");
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& outputSplitSizes,
                                                                std::vector<int64_t>& inputSplitSizes,
                                                                const c10d::AllToAllOptions& opts) {
  checkTensor(input, "input");
  checkTensor(output, "output");
  checkSameDtype(output, input, "output");
  at::Tensor in = input, out = output;
  if (outputSplitSizes.empty() && inputSplitSizes.empty()) {
    TORCH_CHECK(out.numel() == in.numel(), "reccl: output: ", out.numel(), " elements, the input has ", in.numel());
    TORCH_CHECK(in.numel() % size_ == 0, "reccl: input: ", in.numel(), " elements do not split evenly over ", size_,
                " ranks");
    MoveUnits u = moveUnits(in);
    size_t perPeer = u.count / static_cast<size_t>(size_);
    return submit(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {out}, opts.timeout,
                  [in, out, perPeer, type = u.type](recclComm_t comm) {
                    // reccl refuses in-place all-to-all; torch allows it.
                    at::Tensor src = in.data_ptr() == out.data_ptr() ? in.clone() : in;
                    return recclAllToAll(bytes(src), bytes(out), perPeer, type, comm, nullptr);
                  });
  }
  std::vector<int64_t> inLen, outLen;
  auto inOff = splitOffsets(in, inputSplitSizes, size_, &inLen, "input");
  auto outOff = splitOffsets(out, outputSplitSizes, size_, &outLen, "output");
  // The part a rank keeps is copied, not sent: its two sizes must agree, checked here so that a
  // refused call runs nothing on any rank (as reccl would refuse it only once the group ran).
  const int64_t keep = byteCount(rows(in, inOff[rank_], inLen[rank_]));
  const int64_t take = byteCount(rows(out, outOff[rank_], outLen[rank_]));
  TORCH_CHECK(keep == take, "reccl: input_split_sizes/output_split_sizes: this rank's part for itself is ", keep,
              " bytes in the input and ", take, " bytes in the output; they must be equal");
  std::vector<PeerOp> ops;
  for (int p = 0; p < size_; ++p) {
    ops.push_back({true, rows(in, inOff[p], inLen[p]), p});
    ops.push_back({false, rows(out, outOff[p], outLen[p]), p});
  }
  return submitGroup(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {out}, opts.timeout, std::move(ops));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "reccl: all_to_all: expected ", size_, " input and output tensors (one per rank), got ", inputs.size(),
              " and ", outputs.size());
  std::vector<PeerOp> ops;
  for (int p = 0; p < size_; ++p) {
    checkTensor(inputs[p], "input_tensor_list");
    checkTensor(outputs[p], "output_tensor_list");
    checkSameDtype(outputs[p], inputs[p], "output_tensor_list");
    ops.push_back({true, inputs[p], p});
    ops.push_back({false, outputs[p], p});
  }
  TORCH_CHECK(byteCount(inputs[rank_]) == byteCount(outputs[rank_]), "reccl: all_to_all: this rank's tensors for "
              "itself differ in size: input_tensor_list[", rank_, "] has ", inputs[rank_].numel(),
              " elements, output_tensor_list[", rank_, "] has ", outputs[rank_].numel());
  return submitGroup(c10d::OpType::ALLTOALL, "all_to_all", outputs, opts.timeout, std::move(ops));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  at::Tensor in = singleTensor(inputs, "tensor");
  int root = checkRank(opts.rootRank, size_, "dst");
  std::vector<PeerOp> ops;
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    outs = perRankList(outputs, size_, in, "gather_list");
    for (int p = 0; p < size_; ++p) ops.push_back({false, outs[p], p});
    ops.push_back({true, in, root});
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "reccl: gather_list: must be empty on ranks other than the destination");
    ops.push_back({true, in, root});
  }
  return submitGroup(c10d::OpType::GATHER, "gather", outs, opts.timeout, std::move(ops));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  at::Tensor out = singleTensor(outputs, "tensor");
  int root = checkRank(opts.rootRank, size_, "src");
  std::vector<PeerOp> ops;
  if (rank_ == root) {
    const auto& parts = perRankList(inputs, size_, out, "scatter_list");
    for (int p = 0; p < size_; ++p) ops.push_back({true, parts[p], p});
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "reccl: scatter_list: must be empty on ranks other than the source");
  }
  ops.push_back({false, out, root});
  return submitGroup(c10d::OpType::SCATTER, "scatter", {out}, opts.timeout, std::move(ops));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::pointToPoint(bool isSend, std::vector<at::Tensor>& tensors,
                                                               int peer, int tag) {
  at::Tensor t = singleTensor(tensors, "tensor");
  checkRank(peer, size_, isSend ? "dst" : "src");
  checkTag(tag);
  const char* name = isSend ? "send" : "recv";
  auto type = isSend ? c10d::OpType::SEND : c10d::OpType::RECV;
  {
    std::lock_guard lk(coalesceMu_);
    if (coalescing_) {
      auto work = c10::make_intrusive<WorkReccl>(rank_, type, name, std::vector<at::Tensor>{t}, timeout_, latch_);
      coalesced_.push_back({isSend, t, peer});
      coalescedWorks_.push_back(work);
      return work;
    }
  }
  if (peer == rank_) return submitGroup(type, name, {t}, c10d::kUnsetTimeout, {PeerOp{isSend, t, peer}});
  auto work = c10::make_intrusive<WorkReccl>(rank_, type, name, std::vector<at::Tensor>{t}, timeout_, latch_);
  if (auto why = latch_->get()) {  // no new lane for a group that failed
    work->complete(*why);
    return work;
  }
  enqueueOn(lanes_->lane(peer, isSend), work, name, laneCall(PeerOp{isSend, t, peer}), latch_);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  return pointToPoint(true, tensors, dstRank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupReccl::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  return pointToPoint(false, tensors, srcRank, tag);
}

void ProcessGroupReccl::startCoalescing() {
  std::lock_guard lk(coalesceMu_);
  TORCH_CHECK(!coalescing_, "reccl: startCoalescing: already coalescing");
  coalescing_ = true;
}

void ProcessGroupReccl::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /* reqs: the same Works */) {
  std::vector<PeerOp> ops;
  std::vector<c10::intrusive_ptr<WorkReccl>> works;
  {
    std::lock_guard lk(coalesceMu_);
    TORCH_CHECK(coalescing_, "reccl: endCoalescing without startCoalescing");
    coalescing_ = false;
    ops.swap(coalesced_);
    works.swap(coalescedWorks_);
  }
  if (auto why = latch_->get()) {  // no new lane for a group that failed
    for (const auto& w : works) w->complete(*why);
    return;
  }
  std::vector<PeerOp> selfOps;
  std::vector<c10::intrusive_ptr<WorkReccl>> selfWorks;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].peer == rank_) {  // a send to itself completes only with its receive: one group
      selfOps.push_back(ops[i]);
      selfWorks.push_back(works[i]);
    } else {
      enqueueOn(lanes_->lane(ops[i].peer, ops[i].isSend), works[i], ops[i].isSend ? "send" : "recv",
                laneCall(ops[i]), latch_);
    }
  }
  if (selfOps.empty()) return;
  worker_->enqueue(CommOp{"batch_isend_irecv", [selfOps](recclComm_t comm) { return runPeerOps(comm, selfOps); },
                          [selfWorks](const std::string& error) {
                            for (const auto& w : selfWorks) w->complete(error);
                          }});
}

}  // namespace reccl_torch
