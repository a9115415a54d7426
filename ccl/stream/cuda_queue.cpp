#include "stream/cuda_queue.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>

#include <string>

#include "reccl/common/log.h"
#include "reccl/common/params.h"
#include "reduce/reduce.h"
#include "transport/cuda/cuda_status.h"
#include "transport/cuda/memory_kind.h"

namespace reccl::stream {
namespace {

// A stream whose earlier work, or our copies, do not finish within this after the host part
// ended is stuck; teardown then leaks the pinned memory rather than free it under the GPU.
constexpr int64_t kTeardownWaitMs = 10000;

}  // namespace

Result<QueueOptions> QueueOptions::fromEnv() {
  QueueOptions o;
  o.slotBytes = static_cast<size_t>(params::CudaChunkBytes());
  o.slots = static_cast<int>(params::CudaSlots());
  RECCL_ASSIGN_OR_RETURN(o.gate, parseGateMode(params::CudaGate(), StreamGate::memOpAvailable()));
  return o;
}

CudaQueue::Notifier::Notifier(int slots) : staged(static_cast<size_t>(slots)) {
  for (int k = 0; k < slots; ++k) ctx.emplace_back(this, k);
}

CudaQueue::CudaQueue(core::Comm& comm, const QueueOptions& opts) : comm_(comm), opts_(opts) {}

Result<std::unique_ptr<CudaQueue>> CudaQueue::create(core::Comm& comm, const QueueOptions& opts) {
  std::unique_ptr<CudaQueue> q(new CudaQueue(comm, opts));
  q->worker_ = std::thread([p = q.get()] {
    pthread_setname_np(pthread_self(), "reccl-cudaq");
    p->workerLoop();
  });
  return q;
}

CudaQueue::~CudaQueue() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();  // drains the FIFO: every op ends (done or failed)
  std::lock_guard lk(enqueueMu_);
  if (!ready_) return;
  gate_.open(static_cast<uint32_t>(issued_.load()));
  bool clean = !enqueueBroke_;
  for (size_t k = 0; clean && k < slotFree_.size(); ++k)
    if (slotUsed_[k] && !slotFree_[k].wait(Deadline::afterMs(kTeardownWaitMs)).ok()) clean = false;
  if (clean) {
    delete notifier_;
    return;
  }
  // A stream never got past its earlier work, or an enqueue broke off with copies on a stream
  // and no event after them: it may still copy into the slots, run a host function or poll the
  // gate. Those must stay valid, so they are leaked.
  RECCL_WARN(kLogColl, "rank %d: %s; leaking %zu bytes of pinned memory", comm_.rank(),
             enqueueBroke_ ? "an enqueue failed part-way, so a CUDA stream may still use this communicator's "
                             "staging memory"
                           : "a CUDA stream still holds this communicator's staging memory after destroy's wait",
             opts_.slotBytes * static_cast<size_t>(opts_.slots));
  (void)slots_.release();
  gate_.leak();
}

std::byte* CudaQueue::slot(uint64_t piece) const {
  return slots_.data() + (piece % static_cast<uint64_t>(opts_.slots)) * opts_.slotBytes;
}

Status CudaQueue::setUp(int device) {
  device_ = device;
  RECCL_ASSIGN_OR_RETURN(gate_, StreamGate::create(opts_.gate));
  RECCL_ASSIGN_OR_RETURN(slots_, cuda::PinnedBuffer::create(opts_.slotBytes * static_cast<size_t>(opts_.slots)));
  slotFree_.clear();
  for (int k = 0; k < opts_.slots; ++k) {
    RECCL_ASSIGN_OR_RETURN(cuda::Event e, cuda::Event::create());
    slotFree_.push_back(std::move(e));
  }
  slotUsed_.assign(static_cast<size_t>(opts_.slots), false);
  notifier_ = new Notifier(opts_.slots);
  ready_ = true;
  RECCL_INFO(kLogInit, "rank %d: cuda streams on device %d: %d pinned slots of %zu bytes, gate %s", comm_.rank(),
             device, opts_.slots, opts_.slotBytes, gateModeName(gate_.mode()));
  return Status::Ok();
}

// A host function on the user's stream after a piece's input copies: no CUDA calls and no
// waiting (CUDA's rules for host functions), a counter and a wake-up for the worker.
void CUDART_CB CudaQueue::notifyStaged(void* arg) {
  auto* ctx = static_cast<std::pair<Notifier*, int>*>(arg);
  Notifier* n = ctx->first;
  n->staged[static_cast<size_t>(ctx->second)].fetch_add(1, std::memory_order_release);
  { std::lock_guard lk(n->mu); }
  n->cv.notify_all();
}

// Input copies run K-1 pieces ahead of the gates: while the worker runs piece i, the GPU has
// already copied pieces i+1 .. i+K-1 into their slots. Piece i+K-1 reuses the slot of piece i-1,
// whose output copy is earlier on the stream; a slot last used by another call (maybe on another
// stream) is waited for through its event.
Status CudaQueue::enqueuePieces(Op& op, cudaStream_t s) {
  const auto K = static_cast<uint64_t>(opts_.slots);
  const size_t ahead = static_cast<size_t>(K - 1);
  const size_t n = op.pieces.size();
  op.first = nextPiece_;
  auto stage = [&](size_t j) -> Status {
    const uint64_t g = op.first + j;
    const size_t k = static_cast<size_t>(g % K);
    if (slotUsed_[k]) RECCL_CUDA_TRY(cudaStreamWaitEvent(s, slotFree_[k].get(), 0));
    std::byte* base = slot(g);
    for (const StageCopy& cp : op.pieces[j].in)
      if (op.onGpu[static_cast<size_t>(cp.buffer)])
        RECCL_CUDA_TRY(cudaMemcpy2DAsync(base + cp.stageOffset, cp.stagePitch,
                                         op.user[static_cast<size_t>(cp.buffer)] + cp.userOffset, cp.userPitch,
                                         cp.width, cp.height, cudaMemcpyDefault, s));
    RECCL_CUDA_TRY(cudaLaunchHostFunc(s, notifyStaged, &notifier_->ctx[k]));
    return Status::Ok();
  };
  for (size_t j = 0; j < std::min(ahead, n); ++j) RECCL_TRY(stage(j));
  for (size_t i = 0; i < n; ++i) {
    if (i + ahead < n) RECCL_TRY(stage(i + ahead));
    const uint64_t g = op.first + i;
    const size_t k = static_cast<size_t>(g % K);
    RECCL_TRY(gate_.wait(s, static_cast<uint32_t>(g + 1)));
    nextPiece_ = g + 1;
    issued_.store(g + 1);
    std::byte* base = slot(g);
    for (const StageCopy& cp : op.pieces[i].out)
      if (op.onGpu[static_cast<size_t>(cp.buffer)])
        RECCL_CUDA_TRY(cudaMemcpy2DAsync(op.user[static_cast<size_t>(cp.buffer)] + cp.userOffset, cp.userPitch,
                                         base + cp.stageOffset, cp.stagePitch, cp.width, cp.height,
                                         cudaMemcpyDefault, s));
    RECCL_CUDA_TRY(cudaEventRecord(slotFree_[k].get(), s));
    slotUsed_[k] = true;
  }
  return Status::Ok();
}

Status CudaQueue::enqueue(const algo::Collective& c, void* stream) {
  cudaStream_t s = stream ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy;
  int dev = 0;
  if (stream)
    RECCL_CUDA_TRY(cudaStreamGetDevice(s, &dev));
  else
    RECCL_CUDA_TRY(cudaGetDevice(&dev));
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  RECCL_CUDA_TRY(cudaStreamIsCapturing(s, &cap));
  if (cap != cudaStreamCaptureStatusNone)
    return Status(Errc::kInvalidUsage, "stream: capturing into a CUDA graph is not supported (the stream waits on "
                                       "host progress that a graph replay would not repeat)");
  RECCL_TRY(asyncError());
  auto op = std::make_shared<Op>();
  op->coll = c;
  op->user = userBuffers(c);
  for (std::byte* b : op->user) {
    RECCL_ASSIGN_OR_RETURN(cuda::PointerInfo info, cuda::classifyPointer(b));
    op->onGpu.push_back(cuda::needsGpuCopy(info.kind));
  }
  RECCL_ASSIGN_OR_RETURN(op->pieces, planPieces(c, comm_.rank(), comm_.nranks(), opts_.slotBytes));
  cuda::Event doneEv;
  {
    std::lock_guard lk(enqueueMu_);
    cuda::DeviceGuard guard(dev);
    if (!guard.ok()) return Status(Errc::kDevice, "stream: cannot make its device " + std::to_string(dev) + " current");
    if (!ready_) {
      RECCL_TRY(setUp(dev));
    } else if (dev != device_) {
      return Status(Errc::kInvalidUsage, "stream: on device " + std::to_string(dev) + ", but this communicator's "
                                         "streams are on device " + std::to_string(device_));
    }
    Status st = enqueuePieces(*op, s);
    if (st.ok() && !stream) {
      auto ev = cuda::Event::create();
      st = ev.ok() ? cuda::cudaStatus(cudaEventRecord(ev->get(), s), "cudaEventRecord") : ev.status();
      if (ev.ok()) doneEv = std::move(ev).value();
    }
    if (!st.ok()) {
      enqueueBroke_ = true;
      fail(st);  // pieces already on the stream must not hold it
      return st;
    }
    push(op);
  }
  if (!stream) {
    int64_t ms = comm_.options().timeoutMs * static_cast<int64_t>(op->pieces.size() + 1) + 1000;
    RECCL_TRY(doneEv.wait(Deadline::afterMs(ms)).Wrap("stream: NULL stream collective"));
  }
  return asyncError();
}

void CudaQueue::push(std::shared_ptr<Op> op) {
  bool failedAlready;
  {
    std::lock_guard lk(mu_);
    failedAlready = !failed_.ok();
    fifo_.push_back(std::move(op));
  }
  cv_.notify_all();
  // A failure latched between the pieces' enqueue and here opened the gates issued then only.
  if (failedAlready) gate_.open(static_cast<uint32_t>(issued_.load()));
}

Status CudaQueue::runAfterQueued(const algo::Collective& c) {
  auto op = std::make_shared<Op>();
  op->coll = c;
  op->device = false;
  op->done = std::make_shared<Done>();
  size_t ahead;
  {
    std::lock_guard lk(mu_);
    if (!failed_.ok()) return failed_;
    ahead = 0;
    for (const auto& o : fifo_) ahead += o->pieces.size() + 1;
  }
  push(op);
  auto& d = *op->done;
  std::unique_lock lk(d.mu);
  auto limit = std::chrono::milliseconds(comm_.options().timeoutMs * static_cast<int64_t>(ahead + 2) + 1000);
  if (!d.cv.wait_for(lk, limit, [&] { return d.done; }))
    return Status(Errc::kTimeout, "host collective queued behind stream work did not run within its deadline");
  return d.status;
}

bool CudaQueue::idle() const {
  std::lock_guard lk(mu_);
  return fifo_.empty() && !busy_;
}

Status CudaQueue::asyncError() const {
  std::lock_guard lk(mu_);
  return failed_;
}

void CudaQueue::abort() noexcept {
  aborted_.store(true);
  if (Notifier* n = notifier_) {
    { std::lock_guard lk(n->mu); }
    n->cv.notify_all();
  }
  cv_.notify_all();
}

void CudaQueue::fail(const Status& s) {
  // Broken, the communicator fails its connections, so the peers stop waiting for this rank
  // (a no-op when the failure came from it).
  (void)comm_.run([&] { return s; });
  {
    std::lock_guard lk(mu_);
    if (!failed_.ok()) {
      gate_.open(static_cast<uint32_t>(issued_.load()));
      return;
    }
    failed_ = s;
  }
  RECCL_WARN(kLogColl, "rank %d: collective on a CUDA stream failed: %s (later calls on this communicator fail "
                       "with it; recclCommGetAsyncError reports it)", comm_.rank(), s.ToString().c_str());
  gate_.open(static_cast<uint32_t>(issued_.load()));
}

Status CudaQueue::waitStaged(uint64_t piece) {
  const auto K = static_cast<uint64_t>(opts_.slots);
  const uint64_t want = piece / K + 1;
  auto& counter = notifier_->staged[static_cast<size_t>(piece % K)];
  const Deadline d = Deadline::afterMs(comm_.options().timeoutMs);
  std::unique_lock lk(notifier_->mu);
  while (counter.load(std::memory_order_acquire) < want) {
    if (aborted_.load()) return Status(Errc::kAborted, "communicator aborted");
    if (d.expired())
      return Status(Errc::kTimeout, "stream: the input of piece " + std::to_string(piece) + " did not arrive within "
                                    "RECCL_TIMEOUT_MS=" + std::to_string(comm_.options().timeoutMs) +
                                    " (earlier work on the stream stuck?)");
    notifier_->cv.wait_for(lk, std::chrono::milliseconds(100));
  }
  return Status::Ok();
}

Status CudaQueue::runOp(Op& op) {
  // A PreMulSum's recclScalarDevice scalar is read once, as the op starts in stream order (for
  // pieces: once the first is staged, so a value that work earlier on the stream wrote is the one
  // read): every piece multiplies by the same value.
  auto readScalar = [&op] {
    if (op.coll.op != reduce::kPreMulSum || !op.coll.preMul.at) return;
    std::memcpy(op.coll.preMul.value.data(), op.coll.preMul.at, reduce::typeSize(op.coll.dtype));
    op.coll.preMul.at = nullptr;
  };
  if (!op.device) {
    readScalar();
    RECCL_TRY(asyncError());
    Status st = comm_.run([&] { return algo::run(comm_, op.coll); });
    if (!st.ok()) fail(st);
    return st;
  }
  Status st = asyncError();
  for (size_t i = 0; i < op.pieces.size(); ++i) {
    const Piece& p = op.pieces[i];
    const uint64_t g = op.first + i;
    if (st.ok()) st = waitStaged(g);
    if (!st.ok()) {
      fail(st);
    } else {
      readScalar();
      st = runPieceOnHost(comm_, op.coll, p, op.user, op.onGpu, slot(g));
      if (!st.ok()) fail(st);
    }
    gate_.open(static_cast<uint32_t>(g + 1));
  }
  return st;
}

void CudaQueue::workerLoop() {
  for (;;) {
    std::shared_ptr<Op> op;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !fifo_.empty(); });
      if (fifo_.empty()) return;
      op = std::move(fifo_.front());
      fifo_.pop_front();
      busy_ = true;
    }
    Status st = runOp(*op);
    {
      std::lock_guard lk(mu_);
      busy_ = false;
    }
    cv_.notify_all();
    if (op->done) {
      std::lock_guard lk(op->done->mu);
      op->done->done = true;
      op->done->status = st;
      op->done->cv.notify_all();
    }
  }
}

}  // namespace reccl::stream
