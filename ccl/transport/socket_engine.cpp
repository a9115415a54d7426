#include "transport/socket_engine.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "reccl/common/deadline.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"

namespace reccl::transport {
namespace {

// How long the thread sleeps with nothing in flight finishing, and with deferred work pending
// (short: it bounds how late a deferred ack reaches a sender that waits for it).
constexpr long kIdleNs = 100 * 1000 * 1000;
constexpr long kDeferredIdleNs = 1000 * 1000;

// A happens-before edge from every ring's last use to every ring made after it. The kernel may
// map a new ring where a retired one was, and liburing maps and unmaps with raw system calls, so
// without this edge ThreadSanitizer sees the new engine's first SQE writes race with the retired
// engine's (finished) thread. A release when a ring goes, an acquire when one is made: once per
// engine, nothing on the data path.
std::atomic<uint64_t> gRingsRetired{0};

}  // namespace

Result<std::unique_ptr<SocketEngine>> SocketEngine::create(const std::string& name, bool measureEnterCpu) {
  std::unique_ptr<SocketEngine> e(new SocketEngine());
  e->name_ = name;
  e->measureEnterCpu_ = measureEnterCpu;
  e->ioChunkBytes_ = static_cast<size_t>(std::max<int64_t>(0, params::SocketIoChunkBytes()));
  e->removeTimeoutMs_ = std::max<int64_t>(2, params::SocketRemoveTimeoutMs());
  int rc = io_uring_queue_init(512, &e->ring_, 0);
  if (rc < 0) return Status::FromErrno(-rc, "io_uring_queue_init");
  e->ringInit_ = true;
  (void)gRingsRetired.load(std::memory_order_acquire);
  e->event_.reset(eventfd(0, EFD_CLOEXEC));
  if (!e->event_) return Status::FromErrno(errno, "eventfd");
  e->eventOp_.kind = -1;
  e->thread_ = std::thread([p = e.get()] { p->run(); });
  e->threadId_ = e->thread_.get_id();
  e->started_ = true;
  return e;
}

SocketEngine::~SocketEngine() { stop(); }

void SocketEngine::stop() noexcept {
  std::lock_guard stopLk(stopMu_);  // a removal past its deadline may stop the engine too
  if (thread_.joinable()) {
    stop_.store(true);
    uint64_t one = 1;
    [[maybe_unused]] auto n = write(event_.get(), &one, sizeof(one));
    thread_.join();
  }
  if (ringInit_) {
    // Shut every socket down and reap what is in flight, so the kernel never writes into a
    // buffer after its owner is gone.
    for (auto* p : active_) p->quiesce();
    uint64_t one = 1;
    [[maybe_unused]] auto n = write(event_.get(), &one, sizeof(one));
    auto busy = [&] {
      if (eventOp_.inflight) return true;
      for (auto* p : active_)
        if (p->inflight()) return true;
      return false;
    };
    for (int i = 0; i < 200 && busy(); ++i) {
      io_uring_submit(&ring_);
      __kernel_timespec ts{};
      ts.tv_nsec = 5 * 1000 * 1000;
      io_uring_cqe* cqe = nullptr;
      if (io_uring_wait_cqe_timeout(&ring_, &cqe, &ts) == 0 && cqe) {
        auto* op = static_cast<IoOp*>(io_uring_cqe_get_data(cqe));
        if (op) op->inflight = false;
        io_uring_cqe_seen(&ring_, cqe);
      }
    }
    gRingsRetired.fetch_add(1, std::memory_order_release);
    io_uring_queue_exit(&ring_);
    ringInit_ = false;
  }
}

void SocketEngine::add(EnginePath* p) {
  {
    std::lock_guard lk(mu_);
    pending_.push_back(p);
    changed_.store(true);
  }
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(event_.get(), &one, sizeof(one));
}

void SocketEngine::remove(EnginePath* p) {
  std::unique_lock lk(mu_);
  pending_.erase(std::remove(pending_.begin(), pending_.end(), p), pending_.end());
  // A successor that never started (its predecessor still draining) is simply not started.
  std::erase_if(successors_, [p](const Successor& x) { return x.next == p; });
  haveSuccessors_.store(!successors_.empty(), std::memory_order_release);
  if (!started_ || stop_.load()) return;
  if (std::this_thread::get_id() == threadId_) {
    // Waiting here would wait for ourselves; no caller does this today.
    RECCL_WARN(kLogNet, "%s: %s removed from its own progress thread; it stays registered", name_.c_str(),
               p->describe().c_str());
    return;
  }
  p->quiesce();
  removing_.push_back(p);
  changed_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(event_.get(), &one, sizeof(one));
  auto gone = [&] {
    return std::find(removing_.begin(), removing_.end(), p) == removing_.end() || stop_.load();
  };
  // shutdown() ends the path's I/O within an engine turn or two; a kernel that keeps an operation
  // pending after it (or an engine thread that does not turn) must neither hang the caller nor
  // let it free memory the kernel may still write into.
  const int64_t limitMs = removeTimeoutMs_;
  auto start = std::chrono::steady_clock::now();
  if (cv_.wait_for(lk, std::chrono::milliseconds(limitMs / 2), gone)) return;
  RECCL_WARN(kLogNet, "%s: %s still has %d operation(s) in flight %lld ms after shutdown; cancelling them",
             name_.c_str(), p->describe().c_str(), p->inflight(), static_cast<long long>(limitMs / 2));
  cancelling_.push_back(p);
  changed_.store(true);
  n = write(event_.get(), &one, sizeof(one));
  if (cv_.wait_until(lk, start + std::chrono::milliseconds(limitMs), gone)) return;
  removing_.erase(std::remove(removing_.begin(), removing_.end(), p), removing_.end());
  cancelling_.erase(std::remove(cancelling_.begin(), cancelling_.end(), p), cancelling_.end());
  RECCL_WARN(kLogNet,
             "%s: %s not released within RECCL_SOCKET_REMOVE_TIMEOUT_MS=%lld (%d operation(s) in flight); "
             "stopping the progress engine, its other connections stop too",
             name_.c_str(), p->describe().c_str(), static_cast<long long>(limitMs), p->inflight());
  lk.unlock();
  stop();
}

void SocketEngine::replace(EnginePath* old, EnginePath* next) {
  {
    std::lock_guard lk(mu_);
    pending_.erase(std::remove(pending_.begin(), pending_.end(), old), pending_.end());
    old->quiesce();
    // `old` itself not started yet (replaced again before its predecessor drained): it never did
    // any I/O, and `next` takes its place behind that predecessor.
    bool chained = false;
    for (auto& x : successors_)
      if (x.next == old) {
        x.next = next;
        chained = true;
      }
    if (!chained) {
      if (std::find(removing_.begin(), removing_.end(), old) == removing_.end()) removing_.push_back(old);
      successors_.push_back(Successor{old, next, std::chrono::steady_clock::now()});
      haveSuccessors_.store(true, std::memory_order_release);
    }
    changed_.store(true);
  }
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(event_.get(), &one, sizeof(one));
}

void SocketEngine::kick() noexcept {
  if (sleeping_.exchange(false, std::memory_order_seq_cst)) {
    uint64_t one = 1;
    [[maybe_unused]] auto n = write(event_.get(), &one, sizeof(one));
  }
}

io_uring_sqe* SocketEngine::sqe(IoOp& op) {
  io_uring_sqe* s = io_uring_get_sqe(&ring_);
  if (!s) {
    io_uring_submit(&ring_);
    s = io_uring_get_sqe(&ring_);
  }
  if (s) {
    op.inflight = true;
    io_uring_sqe_set_data(s, &op);
  }
  return s;
}

void SocketEngine::run() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  std::vector<EnginePath*> draining;  // removed, waiting for their I/O to finish
  while (!stop_.load(std::memory_order_acquire)) {
    if (changed_.exchange(false)) {
      std::lock_guard lk(mu_);
      for (auto* r : removing_) {
        active_.erase(std::remove(active_.begin(), active_.end(), r), active_.end());
        if (std::find(draining.begin(), draining.end(), r) == draining.end()) draining.push_back(r);
      }
      for (auto* p : pending_)
        if (std::find(active_.begin(), active_.end(), p) == active_.end()) active_.push_back(p);
    }
    if (!draining.empty()) {
      std::lock_guard lk(mu_);
      for (auto* c : cancelling_) {
        int fd = c->fd();
        io_uring_sqe* s = fd >= 0 ? io_uring_get_sqe(&ring_) : nullptr;
        if (!s) continue;
        io_uring_prep_cancel_fd(s, fd, IORING_ASYNC_CANCEL_ALL);
        io_uring_sqe_set_data(s, nullptr);  // its completion needs no owner
      }
      cancelling_.clear();
      for (auto it = draining.begin(); it != draining.end();) {
        if ((*it)->inflight() == 0) {
          removing_.erase(std::remove(removing_.begin(), removing_.end(), *it), removing_.end());
          it = draining.erase(it);
        } else {
          ++it;
        }
      }
      cv_.notify_all();
    }
    if (haveSuccessors_.load(std::memory_order_acquire)) {
      // replace(): a successor starts in this turn once its predecessor is off the thread and
      // drained (this thread ran its last completion above).
      std::lock_guard lk(mu_);
      const auto now = std::chrono::steady_clock::now();
      const auto grace = std::chrono::milliseconds(removeTimeoutMs_ / 2);
      for (auto it = successors_.begin(); it != successors_.end();) {
        bool drained = std::find(draining.begin(), draining.end(), it->old) == draining.end() &&
                       std::find(removing_.begin(), removing_.end(), it->old) == removing_.end();
        if (drained) {
          if (std::find(active_.begin(), active_.end(), it->next) == active_.end()) active_.push_back(it->next);
          pending_.push_back(it->next);
          it = successors_.erase(it);
          continue;
        }
        if (!it->cancelled && now - it->since > grace) {
          it->cancelled = true;
          RECCL_WARN(kLogNet, "%s: %s still has %d operation(s) in flight %lld ms after shutdown; cancelling them",
                     name_.c_str(), it->old->describe().c_str(), it->old->inflight(),
                     static_cast<long long>(grace.count()));
          cancelling_.push_back(it->old);  // submitted with remove()'s, by the draining step above
        }
        ++it;
      }
      haveSuccessors_.store(!successors_.empty(), std::memory_order_release);
    }
    if (!eventOp_.inflight) {
      io_uring_sqe* s = sqe(eventOp_);
      if (s) io_uring_prep_read(s, event_.get(), &eventBuf_, sizeof(eventBuf_), 0);
    }
    sleeping_.store(true, std::memory_order_seq_cst);
    bool deferred = false;
    for (auto* p : active_) {
      p->pump(*this);
      deferred = deferred || p->hasDeferredWork();
    }
    __kernel_timespec ts{};
    ts.tv_nsec = deferred ? kDeferredIdleNs : kIdleNs;
    io_uring_cqe* cqe = nullptr;
    // Thread CPU clocks have no vDSO fast path: two system calls per turn, so only when asked.
    timespec cpu0{}, cpu1{};
    if (measureEnterCpu_) clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
    int rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
    if (measureEnterCpu_) {
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
      uint64_t cpuNs =
          static_cast<uint64_t>((cpu1.tv_sec - cpu0.tv_sec) * 1000000000LL + (cpu1.tv_nsec - cpu0.tv_nsec));
      if (cpuNs > maxEnterCpuNs.load(std::memory_order_relaxed)) maxEnterCpuNs.store(cpuNs, std::memory_order_relaxed);
    }
    sleeping_.store(false, std::memory_order_seq_cst);
    if (rc == -ETIME && deferred) {
      for (auto* p : active_) p->idle();
    } else if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EBUSY && rc != -EAGAIN) {
      RECCL_WARN(kLogNet, "io_uring wait failed: %s", strerror(-rc));
    }
    unsigned head;
    unsigned n = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++n;
      auto* op = static_cast<IoOp*>(io_uring_cqe_get_data(cqe));
      if (!op) continue;
      op->inflight = false;
      if (op == &eventOp_) continue;
      op->owner->complete(*this, *op, cqe->res);
    }
    io_uring_cq_advance(&ring_, n);
  }
  std::lock_guard lk(mu_);
  cv_.notify_all();
}

}  // namespace reccl::transport
