#include "process_group_reccl.h"

#include <utility>

#include "store_bootstrap.h"
#include "tensor_args.h"

namespace reccl_torch {

ProcessGroupReccl::ProcessGroupReccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                     std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size), timeout_(timeout), latch_(std::make_shared<FailureLatch>()) {
  TORCH_CHECK(store, "reccl: store: a process group needs a store to bootstrap from");
  TORCH_CHECK(timeout.count() > 0, "reccl: timeout: must be positive, got ", timeout.count(), " ms");
  worker_ = std::make_unique<CommWorker>(initCommFromStore(*store, rank, size, timeout), rank, latch_);
  lanes_ = std::make_unique<PeerLanes>(store, rank, timeout, latch_, *worker_);
  init();
}

namespace {
ProcessGroupReccl::WaitScope waitScope = [](const std::function<void()>& wait) { wait(); };
}  // namespace

void ProcessGroupReccl::setWaitScope(WaitScope scope) { waitScope = scope; }

// The workers run what is queued and destroy their communicators (see CommWorker).
ProcessGroupReccl::~ProcessGroupReccl() {
  waitScope([this] {
    lanes_.reset();
    worker_.reset();
  });
}

c10::intrusive_ptr<WorkReccl> ProcessGroupReccl::submit(c10d::OpType type, const char* name,
                                                        std::vector<at::Tensor> outputs,
                                                        std::chrono::milliseconds optsTimeout, CommOp::Call call) {
  {
    std::lock_guard lk(coalesceMu_);
    TORCH_CHECK(!coalescing_, "reccl: ", name, ": only send and recv may be issued between startCoalescing and endCoalescing");
  }
  auto limit = optsTimeout.count() > 0 ? optsTimeout : timeout_;
  auto work = c10::make_intrusive<WorkReccl>(rank_, type, name, std::move(outputs), limit, latch_);
  enqueueOn(*worker_, work, name, std::move(call), latch_);
  return work;
}

void ProcessGroupReccl::enqueueOn(CommWorker& worker, const c10::intrusive_ptr<WorkReccl>& work,
                                  const std::string& name, CommOp::Call call,
                                  const std::shared_ptr<FailureLatch>& latch) {
  // After a failure nothing more is queued: the worker may still be inside the call that a
  // Work's timeout gave up on.
  if (auto why = latch->get()) {
    work->complete(*why);
    return;
  }
  worker.enqueue(CommOp{name, std::move(call), [work](const std::string& error) { work->complete(error); }});
}

recclResult_t runPeerOps(recclComm_t comm, const std::vector<PeerOp>& ops) {
  recclResult_t r = recclGroupStart();
  if (r != recclSuccess) return r;
  recclResult_t first = recclSuccess;
  for (const auto& op : ops) {
    size_t n = byteCount(op.tensor);
    r = op.isSend ? recclSend(bytes(op.tensor), n, recclUint8, op.peer, comm, nullptr)
                  : recclRecv(bytes(op.tensor), n, recclUint8, op.peer, comm, nullptr);
    if (r != recclSuccess && first == recclSuccess) first = r;
  }
  // Always closed, or this thread's later sends would stay queued in an open group.
  r = recclGroupEnd();
  return first != recclSuccess ? first : r;
}

c10::intrusive_ptr<WorkReccl> ProcessGroupReccl::submitGroup(c10d::OpType type, const char* name,
                                                             std::vector<at::Tensor> outputs,
                                                             std::chrono::milliseconds optsTimeout,
                                                             std::vector<PeerOp> ops, std::function<void()> after) {
  return submit(type, name, std::move(outputs), optsTimeout,
                [ops = std::move(ops), after = std::move(after)](recclComm_t comm) {
                  recclResult_t r = runPeerOps(comm, ops);
                  if (r == recclSuccess && after) after();
                  return r;
                });
}

std::map<std::string, uint64_t> ProcessGroupReccl::stats() const {
  recclCommStats_t s{};
  if (!worker_->stats(&s)) return {};
  lanes_->addStats(&s);
  return {
      {"collectives", s.collectives},
      {"bytesSent", s.bytesSent},
      {"bytesReceived", s.bytesReceived},
      {"failovers", s.failovers},
      {"failbacks", s.failbacks},
      {"bytesResent", s.bytesResent},
      {"duplicateSteps", s.duplicateSteps},
      {"lastFailoverUs", s.lastFailoverUs},
      {"railsUp", s.railsUp},
      {"railsTotal", s.railsTotal},
      {"relayMigrations", s.relayMigrations},
      {"standbyFailovers", s.standbyFailovers},
      {"faultSourceStarting", s.faultSourceStarting},
      {"lostConnections", s.lostConnections},
  };
}

std::string ProcessGroupReccl::faultSource() const {
  recclCommStats_t s{};
  if (!worker_->stats(&s)) return "";
  return s.faultSourceName;
}

}  // namespace reccl_torch
