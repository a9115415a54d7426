// reccl as a c10d process group (torch 1.13's ProcessGroup interface): every operation checks
// its arguments at once (raising in the caller), then runs on the group's worker thread and
// completes a WorkReccl.
//
// Files: process_group_reccl.cpp (life cycle, submission, stats), pg_collectives.cpp (the
// collectives reccl has: allreduce, broadcast, reduce, all-gather, reduce-scatter, barrier),
// pg_point_to_point.cpp (send/recv on the lanes of p2p_lanes.h, coalesced send/recv,
// all-to-all: reccl's own with equal splits, else grouped send/recv, which also make gather
// and scatter).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "comm_worker.h"
#include "p2p_lanes.h"
#include "work_reccl.h"

namespace reccl_torch {

// One send or receive of a reccl group (the bytes of `tensor`).
struct PeerOp {
  bool isSend;
  at::Tensor tensor;
  int peer;
};

// Runs `ops` as one reccl group (recclGroupStart ... recclGroupEnd) on the calling thread.
recclResult_t runPeerOps(recclComm_t comm, const std::vector<PeerOp>& ops);

class ProcessGroupReccl : public c10d::ProcessGroup {
 public:
  // How the destructor waits for the worker thread to finish. The worker may drop the last
  // reference to a tensor whose Python object it then frees, which takes the GIL, and Python
  // destroys a group while holding it: module.cpp installs a scope that releases the GIL.
  using WaitScope = void (*)(const std::function<void()>& wait);
  static void setWaitScope(WaitScope scope);

  // Collective: every rank of the group constructs it with the same store (see
  // store_bootstrap.h). `timeout` bounds each operation (Work::wait, reccl's collective deadline).
  ProcessGroupReccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout);
  ~ProcessGroupReccl() override;

  const std::string getBackendName() const override { return "reccl"; }

  // pg_collectives.cpp
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;

  // pg_point_to_point.cpp
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  // Between these, send and recv are collected and issued together at the end
  // (torch.distributed.batch_isend_irecv): each on its lane, those to and from this rank as one
  // reccl group, so their order across ranks cannot deadlock.
  void startCoalescing() override;
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) override;

  // The communicator's counters (recclCommStats_t) by field name, the lanes' added in where
  // they add up (counts; lastFailoverUs is the latest failover's; faultSourceStarting while any
  // of them starts); empty once aborted.
  std::map<std::string, uint64_t> stats() const;
  // The communicator's link-fault source ("bpf:...", "rtnetlink", ...); "" once aborted.
  std::string faultSource() const;
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  // Queues `call` on the worker and returns the Work it completes. `optsTimeout` is the
  // operation's own timeout from its options (kUnsetTimeout: the group's).
  c10::intrusive_ptr<WorkReccl> submit(c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
                                       std::chrono::milliseconds optsTimeout, CommOp::Call call);
  // Queues `call` for `work` on `worker` (the group's or a lane's), or fails it at once when
  // the group failed already.
  static void enqueueOn(CommWorker& worker, const c10::intrusive_ptr<WorkReccl>& work, const std::string& name,
                        CommOp::Call call, const std::shared_ptr<FailureLatch>& latch);
  // Queues `ops` as one reccl group; `after` runs on the worker when it succeeded.
  c10::intrusive_ptr<WorkReccl> submitGroup(c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
                                            std::chrono::milliseconds optsTimeout, std::vector<PeerOp> ops,
                                            std::function<void()> after = {});
  c10::intrusive_ptr<c10d::Work> pointToPoint(bool isSend, std::vector<at::Tensor>& tensors, int peer, int tag);

  const std::chrono::milliseconds timeout_;
  std::shared_ptr<FailureLatch> latch_;
  std::unique_ptr<CommWorker> worker_;
  std::unique_ptr<PeerLanes> lanes_;

  // Send/recv between startCoalescing and endCoalescing (calls from one Python thread).
  std::mutex coalesceMu_;
  bool coalescing_ = false;
  std::vector<PeerOp> coalesced_;
  std::vector<c10::intrusive_ptr<WorkReccl>> coalescedWorks_;
};

}  // namespace reccl_torch
