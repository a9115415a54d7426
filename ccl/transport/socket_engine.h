// One progress thread per communicator driving every socket with io_uring: plain send/recv SQEs,
// batched submission, one send and one receive in flight per socket (ordering on a stream).
#pragma once

#include <liburing.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::transport {

class SocketEngine;

// One submitted operation; its address is the CQE's user_data.
struct IoOp {
  class EnginePath* owner = nullptr;
  int kind = 0;
  bool inflight = false;
};

// Something the engine drives: pump() submits what can be submitted, complete() consumes a CQE.
class EnginePath {
 public:
  virtual ~EnginePath() = default;
  virtual void pump(SocketEngine& engine) = 0;
  virtual void complete(SocketEngine& engine, IoOp& op, int res) = 0;
  // Stops I/O (shutdown the socket) so in-flight operations complete.
  virtual void quiesce() noexcept = 0;
  virtual int inflight() const noexcept = 0;
  // Work the path holds back while the engine is busy anyway (deferred acks): the engine then
  // wakes after a short idle time instead of its long one and calls idle(), and pumps again.
  virtual bool hasDeferredWork() const noexcept { return false; }
  virtual void idle() noexcept {}
  // The socket whose I/O the engine cancels when a removal outlives its grace time (-1: none).
  virtual int fd() const noexcept = 0;
  virtual std::string describe() const = 0;
};

// Lock rule: mu_ guards the registered set and the removals, replacements and cancellations in
// flight (add, remove, replace and the progress thread between its loop turns take it; remove()
// waits on cv_ under it); stopMu_ serializes stop(), which a removal past its deadline may call
// from another thread, always after releasing mu_. The progress thread holds no lock while it
// pumps and completes paths; a path's own lock (a socket path's txMu_ / ackMu_) is taken inside.
class SocketEngine {
 public:
  // measureEnterCpu: record maxEnterCpuNs (two thread-CPU clock reads, real system calls, per
  // loop turn; tests only).
  static Result<std::unique_ptr<SocketEngine>> create(const std::string& name, bool measureEnterCpu = false);
  ~SocketEngine();
  SocketEngine(const SocketEngine&) = delete;
  SocketEngine& operator=(const SocketEngine&) = delete;

  // Thread-safe. The path must outlive its registration.
  void add(EnginePath* p);
  // Thread-safe; blocks until the progress thread no longer touches p (in-flight I/O finished),
  // at most RECCL_SOCKET_REMOVE_TIMEOUT_MS: past half of it the thread cancels p's I/O, past all
  // of it the engine is stopped (every path it drives stops; their collectives fail at their own deadline), so that
  // p may be freed in any case. Either escalation is logged as a warning naming p.
  void remove(EnginePath* p);
  // Thread-safe, does not wait: quiesces `old` and takes it off the progress thread like remove(),
  // and starts `next` on that thread once old's in-flight I/O has finished, so that the two never
  // touch the same memory at once. A migrated receiver hands its new path over this way instead of
  // waiting for the progress thread in remove() and then waking it again in add(): one thread
  // hand-off less on a failover's path, and the caller (which sends the migration reply) does not
  // wait for a thread that a busy machine may keep off a CPU. Past half of
  // RECCL_SOCKET_REMOVE_TIMEOUT_MS the thread cancels old's I/O (logged); next waits for it.
  // `old` must stay alive until remove(old) has returned (a retired path lives as long as its port).
  void replace(EnginePath* old, EnginePath* next);
  // Wakes the progress thread (cheap when it is awake anyway).
  void kick() noexcept;
  // Stops the thread and cancels every in-flight operation; paths may be destroyed afterwards.
  void stop() noexcept;

  // For paths, from the progress thread only.
  io_uring_sqe* sqe(IoOp& op);

  std::atomic<uint64_t> bytesSent{0};
  std::atomic<uint64_t> bytesReceived{0};
  std::atomic<uint64_t> inlineSends{0};  // steps sent whole by the posting thread
  std::atomic<uint64_t> acksSent{0};     // ack frames handed to the sockets
  std::atomic<uint64_t> inlineAcks{0};   // of those, sent whole by the releasing thread
  // Acks due when a step was applied that the releasing thread left to the progress thread,
  // which had the acks at that moment (it sends the newest one next).
  std::atomic<uint64_t> acksLeftToProgress{0};
  // Largest byte count one send / receive submission asked for (RECCL_SOCKET_IO_CHUNK_BYTES).
  std::atomic<uint64_t> maxSubmitBytes{0};
  void noteSubmit(size_t bytes) noexcept {
    if (bytes > maxSubmitBytes.load(std::memory_order_relaxed)) maxSubmitBytes.store(bytes, std::memory_order_relaxed);
  }
  // Longest CPU time the progress thread spent inside one io_uring_enter (submitting, and the
  // copies io_uring runs inline there): how long it was away from its loop at a stretch, without
  // the time a busy machine kept it off a CPU. Only an engine created with measureEnterCpu keeps it.
  std::atomic<uint64_t> maxEnterCpuNs{0};
  // Bytes one send / receive submission may carry (0: no cap).
  size_t ioChunkBytes() const noexcept { return ioChunkBytes_; }

 private:
  SocketEngine() = default;
  void run();

  io_uring ring_{};
  bool ringInit_ = false;
  UniqueFd event_;
  uint64_t eventBuf_ = 0;
  IoOp eventOp_;
  std::thread thread_;
  // Set once in create(): remove() reads these while a stop() may be joining thread_.
  std::thread::id threadId_;
  bool started_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> changed_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<EnginePath*> pending_;  // under mu_: the registered set
  std::vector<EnginePath*> removing_;
  std::vector<EnginePath*> cancelling_;  // under mu_: removals past their grace time
  // under mu_: paths to start once the path they replace has drained (replace())
  struct Successor {
    EnginePath* old;
    EnginePath* next;
    std::chrono::steady_clock::time_point since;
    bool cancelled = false;
  };
  std::vector<Successor> successors_;
  // !successors_.empty(), kept under mu_ for the progress loop's unlocked look each turn.
  std::atomic<bool> haveSuccessors_{false};
  std::mutex stopMu_;
  size_t ioChunkBytes_ = 0;
  int64_t removeTimeoutMs_ = 2000;  // RECCL_SOCKET_REMOVE_TIMEOUT_MS, read once in create()
  bool measureEnterCpu_ = false;
  uint64_t generation_ = 0;           // bumped by the thread after applying removals
  std::vector<EnginePath*> active_;   // progress thread's copy
  std::string name_;
};

}  // namespace reccl::transport
