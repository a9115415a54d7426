// Detector (detector.h): the loop that drives it, on its own thread (start) or on the caller's
// (startOnCaller, dispatch), and the event queue it fills (drain, waitEvents).
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "detector_private.h"
#include "reccl/common/deadline.h"
#include "reccl/common/log.h"
#include "reccl/detector/rdma_async_source.h"
#include "reccl/detector/rdma_loss.h"

namespace reccl::detector {
namespace {
constexpr int kBatch = 32;  // epoll events handled per batch
}  // namespace

Status Detector::start() {
  if (running_.exchange(true)) return Status(Errc::kInvalidArgument, "detector: already started");
  thread_ = std::thread([this] { run(); });
  return Status::Ok();
}

void Detector::stop() {
  if (!running_.exchange(false)) return;
  uint64_t one = 1;
  (void)!write(wakeFd_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

void Detector::rearmTimer() {
  itimerspec its{};
  if (auto next = sm_.nextDeadlineNs()) {
    uint64_t t = std::max<uint64_t>(*next, 1);
    its.it_value.tv_sec = static_cast<time_t>(t / 1'000'000'000ull);
    its.it_value.tv_nsec = static_cast<long>(t % 1'000'000'000ull);
  }
  timerfd_settime(timerFd_.get(), TFD_TIMER_ABSTIME, &its, nullptr);
}

void Detector::run() {
  pthread_setname_np(pthread_self(), "reccl-detector");
  if (opts_.realtimePriority > 0) {
    sched_param sp{};
    sp.sched_priority = opts_.realtimePriority;
    if (int err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp); err != 0)
      RECCL_WARN(kLogDetector, "detector: SCHED_FIFO priority %d not set: %s", opts_.realtimePriority,
                 strerror(err));
  }
  epoll_event evs[kBatch];
  while (running_.load(std::memory_order_acquire)) {
    int n = epoll_wait(epoll_.get(), evs, kBatch, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      RECCL_WARN(kLogDetector, "detector: epoll_wait: %s", strerror(errno));
      return;
    }
    handle(evs, n);
  }
}

Status Detector::startOnCaller() {
  if (running_.exchange(true)) return Status(Errc::kInvalidArgument, "detector: already started");
  return Status::Ok();
}

void Detector::dispatch() {
  if (!running_.load(std::memory_order_acquire) || thread_.joinable()) return;
  epoll_event evs[kBatch];
  int n = epoll_wait(epoll_.get(), evs, kBatch, 0);
  if (n > 0) handle(evs, n);
}

void Detector::handle(const epoll_event* evs, int n) {
  std::vector<LinkEvent> batch;
  std::vector<Callback> cbs;
  {
    std::lock_guard lk(mu_);
    for (int i = 0; i < n; ++i) {
      uint64_t t = evs[i].data.u64;
      uint32_t arg = static_cast<uint32_t>(t);
      switch (static_cast<Tag>(t >> 32)) {
        case kTagBpf:
          if (bpf_) bpf_->consume();
          break;
        case kTagRtnl: {
          if (arg >= netns_.size() || !netns_[arg] || !netns_[arg]->rtnl) break;
          std::vector<LinkSignal> sigs;
          uint64_t now = monotonicNs();
          Status st = netns_[arg]->rtnl->drain(now, sigs);
          if (!st.ok()) RECCL_WARN(kLogDetector, "detector: %s", st.message().c_str());
          for (const auto& s : sigs) feed(s, now);
          applyUrgencyChanges(*netns_[arg]);
          break;
        }
        case kTagRdma: {
          std::vector<LinkSignal> sigs;
          uint64_t now = monotonicNs();
          if (rdma_) rdma_->drain(static_cast<int>(arg), now, sigs);
          for (const auto& s : sigs) feed(s, now);
          if (evs[i].events & (EPOLLERR | EPOLLHUP)) {
            // A device removed or reset under its open context (disassociated): its async fd
            // stays in error for good, and left in the set it would keep the driving thread
            // spinning. Its events are over; the link's own hooks still watch the netdev.
            epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, static_cast<int>(arg), nullptr);
            RECCL_WARN(kLogDetector, "detector: RDMA device %s: async event fd in error (device removed or reset); no "
                       "longer watched", rdma_ ? rdma_->deviceOf(static_cast<int>(arg)).c_str() : "?");
          }
          break;
        }
        case kTagRdmaLoss: {
          if (!rdmaLoss_) break;
          std::vector<LinkSignal> sigs;
          uint64_t now = monotonicNs();
          rdmaLoss_->take(sigs);
          for (const auto& s : sigs) feed(s, now);
          break;
        }
        case kTagTimer: {
          uint64_t exp;
          (void)!read(timerFd_.get(), &exp, sizeof(exp));
          break;
        }
        case kTagWake: {
          uint64_t v;
          (void)!read(wakeFd_.get(), &v, sizeof(v));
          break;
        }
      }
    }
    sm_.onTick(monotonicNs(), pending_);
    rearmTimer();
    for (auto& e : pending_) {
      if (auto it = watches_.find(e.link); it != watches_.end()) {
        e.netns = it->second->info.netns;
        e.slot = it->second->info.slot;
        if (e.type == LinkEventType::kLinkUp) {
          // The gray symptom is over once the link is declared up again.
          setSlotDegraded(slots_[e.slot], false);
          // Asked again as the link is declared up: a request sent at its physical return may
          // have met a device whose queue the kernel had not reactivated yet (link-watch holds a
          // non-urgent device's carrier change up to a second).
          probeUnresolvedNeighbours(*it->second);
        }
      }
      counters_.events++;
      if (queue_.size() >= opts_.queueLimit) {
        counters_.queueOverflows++;
        queue_.pop_front();
      }
      queue_.push_back(e);
      batch.push_back(std::move(e));
    }
    pending_.clear();
    if (!batch.empty()) cbs = callbacks_;
  }
  if (!batch.empty()) {
    uint64_t one = 1;
    (void)!write(eventFd_.get(), &one, sizeof(one));
    for (const auto& e : batch)
      for (auto& cb : cbs) cb(e);
  }
}

std::vector<LinkEvent> Detector::drain() {
  uint64_t v;
  (void)!read(eventFd_.get(), &v, sizeof(v));
  std::lock_guard lk(mu_);
  std::vector<LinkEvent> out(std::make_move_iterator(queue_.begin()),
                             std::make_move_iterator(queue_.end()));
  queue_.clear();
  return out;
}

std::vector<LinkEvent> Detector::waitEvents(int timeoutMs) {
  pollfd p{eventFd_.get(), POLLIN, 0};
  Deadline dl = Deadline::afterMs(timeoutMs);
  for (;;) {
    {
      std::lock_guard lk(mu_);
      if (!queue_.empty()) break;
    }
    int left = dl.remainingMsForPoll();
    if (left == 0) return {};
    int r = poll(&p, 1, left);
    if (r < 0 && errno != EINTR) return {};
  }
  return drain();
}

}  // namespace reccl::detector
