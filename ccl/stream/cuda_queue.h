// Collectives on CUDA streams for one communicator (docs/cuda.md): the calling thread enqueues
// everything the GPU must do on the user's stream at once, the queue's worker thread does the
// host part, and a gate holds the stream in between.
//
// For each piece of a collective (piece_plan.h), on the user's stream:
//   wait for the slot's previous piece to have left it (its event)
//   copy device input -> pinned slot                (cudaMemcpy2DAsync)
//   tell the worker the input is there              (cudaLaunchHostFunc: a counter and a notify)
// and, slots - 1 pieces later on the stream (so the GPU copies ahead while the host works):
//   wait at the gate for this piece                 (stream_gate.h)
//   copy pinned slot -> device output
//   record the slot's event
// The worker takes pieces in order: waits for the input, copies host-side buffers, runs the
// piece's collective with the host algorithms over the channels (so failover works as on host
// data: steps, slots, acks, resend), copies host-side output, opens the gate.
//
// Everything the worker needs from the GPU was enqueued before the gate that waits for it, so
// the user's later work on the stream can never hold up a collective's own copies.
//
// Who owns what: enqueueMu_ serializes enqueuers (piece numbers are stream order); mu_ guards
// the FIFO, busy_, failed_ and stop_; the worker alone runs collectives; host functions touch
// only the Notifier (counters, its own mutex). Errors: the first is latched, every gate is opened
// (the stream never hangs), later calls fail with it.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "stream/piece_plan.h"
#include "stream/queue.h"
#include "stream/stream_gate.h"
#include "transport/cuda/cuda_owners.h"

namespace reccl::stream {

// Settings of the stream layer (RECCL_CUDA_*).
struct QueueOptions {
  size_t slotBytes = 8 << 20;
  int slots = 4;
  GateMode gate = GateMode::kMemOp;
  static Result<QueueOptions> fromEnv();
};

class CudaQueue final : public Queue {
 public:
  static Result<std::unique_ptr<CudaQueue>> create(core::Comm& comm, const QueueOptions& opts);
  ~CudaQueue() override;

  Status enqueue(const algo::Collective& c, void* stream) override;
  Status runAfterQueued(const algo::Collective& c) override;
  bool idle() const override;
  Status asyncError() const override;
  void abort() noexcept override;

  GateMode gateMode() const noexcept { return gate_.mode(); }

 private:
  // What host functions touch: outlives the queue when a stream is stuck at teardown.
  struct Notifier {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::atomic<uint64_t>> staged;  // per slot: pieces whose input arrived, ever
    std::vector<std::pair<Notifier*, int>> ctx;  // host function argument per slot
    explicit Notifier(int slots);
  };
  struct Done {  // a caller waiting for its op (NULL stream, or host op)
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Status status;
  };
  struct Op {
    algo::Collective coll;
    std::vector<Piece> pieces;
    std::vector<std::byte*> user;
    std::vector<bool> onGpu;  // per user buffer: copied by the GPU on the stream
    uint64_t first = 0;       // number of the first piece
    bool device = true;       // false: a host op (runAfterQueued)
    std::shared_ptr<Done> done;
  };

  CudaQueue(core::Comm& comm, const QueueOptions& opts);
  static void CUDART_CB notifyStaged(void* arg);
  Status setUp(int device);
  Status enqueuePieces(Op& op, cudaStream_t s);
  void push(std::shared_ptr<Op> op);
  void workerLoop();
  Status runOp(Op& op);
  Status waitStaged(uint64_t piece);
  void fail(const Status& s);
  std::byte* slot(uint64_t piece) const;

  core::Comm& comm_;
  QueueOptions opts_;
  int device_ = -1;

  std::mutex enqueueMu_;
  bool ready_ = false;              // resources made (enqueueMu_)
  // An enqueue failed part-way (enqueueMu_): a stream may hold copies into slots with no event
  // recorded after them, so teardown cannot tell when the slots are free, and leaks them.
  bool enqueueBroke_ = false;
  uint64_t nextPiece_ = 0;          // (enqueueMu_)
  std::vector<bool> slotUsed_;      // (enqueueMu_)
  std::atomic<uint64_t> issued_{0};  // pieces whose gate wait is on a stream
  StreamGate gate_;
  cuda::PinnedBuffer slots_;
  std::vector<cuda::Event> slotFree_;
  Notifier* notifier_ = nullptr;    // owned; leaked with the slots when a stream is stuck at teardown

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Op>> fifo_;
  bool busy_ = false;
  bool stop_ = false;
  std::atomic<bool> aborted_{false};
  Status failed_;
  std::thread worker_;
};

}  // namespace reccl::stream
