#include "transport/verbs/verbs_progress.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <cerrno>

#include "reccl/common/log.h"

namespace reccl::transport::verbs {

namespace {
// An armed completion queue wakes the thread; this only bounds a sleep if an event went missing.
constexpr int kSleepMs = 50;

uint64_t threadCpuNs() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
}  // namespace

Result<std::unique_ptr<VerbsProgress>> VerbsProgress::start(std::string name) {
  std::unique_ptr<VerbsProgress> e(new VerbsProgress());
  e->name_ = std::move(name);
  e->epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!e->epoll_) return Status::FromErrno(errno, "verbs progress: epoll_create1");
  e->wake_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!e->wake_) return Status::FromErrno(errno, "verbs progress: eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (epoll_ctl(e->epoll_.get(), EPOLL_CTL_ADD, e->wake_.get(), &ev) != 0)
    return Status::FromErrno(errno, "verbs progress: epoll_ctl");
  e->thread_ = std::thread([p = e.get()] { p->run(); });
  return e;
}

VerbsProgress::~VerbsProgress() {
  stop_.store(true, std::memory_order_release);
  uint64_t one = 1;
  if (write(wake_.get(), &one, sizeof(one)) < 0) {
  }
  if (thread_.joinable()) thread_.join();
}

Status VerbsProgress::add(VerbsPath* path) {
  std::lock_guard lk(mu_);
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, path->qp().completionFd(), &ev) != 0)
    return Status::FromErrno(errno, "verbs progress: watching " + path->describe());
  paths_.push_back(path);
  uint64_t one = 1;
  if (write(wake_.get(), &one, sizeof(one)) < 0) {
  }
  return Status::Ok();
}

void VerbsProgress::remove(VerbsPath* path) {
  std::lock_guard lk(mu_);  // the thread holds it for a whole pass
  auto it = std::find(paths_.begin(), paths_.end(), path);
  if (it == paths_.end()) return;
  paths_.erase(it);
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, path->qp().completionFd(), nullptr);
}

int VerbsProgress::pass() noexcept {
  std::lock_guard lk(mu_);
  int work = 0;
  for (VerbsPath* p : paths_) work += p->progress();
  return work;
}

void VerbsProgress::run() noexcept {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  epoll_event evs[16];
  while (!stop_.load(std::memory_order_acquire)) {
    int work = pass();
    cpuNs_.store(threadCpuNs(), std::memory_order_relaxed);
    if (work > 0) continue;
    bool polling = false;
    {
      std::lock_guard lk(mu_);
      for (VerbsPath* p : paths_) polling = polling || p->needsPolling();
      if (!polling)
        for (VerbsPath* p : paths_) {
          Status s = p->qp().arm();
          if (!s.ok()) RECCL_WARN(kLogNet, "%s: %s", p->describe().c_str(), s.message().c_str());
        }
    }
    if (polling) {
      sched_yield();
      continue;
    }
    // A completion that came between the pass and the arm raised no event: look once more.
    if (pass() > 0) continue;
    sleeps_.fetch_add(1, std::memory_order_relaxed);
    int n = epoll_wait(epoll_.get(), evs, 16, kSleepMs);
    if (n < 0 && errno != EINTR) {
      RECCL_WARN(kLogNet, "verbs progress: epoll_wait: %s", strerror(errno));
      continue;
    }
    uint64_t drained;
    while (read(wake_.get(), &drained, sizeof(drained)) > 0) {
    }
    std::lock_guard lk(mu_);
    for (VerbsPath* p : paths_) p->qp().consumeEvents();
  }
  cpuNs_.store(threadCpuNs(), std::memory_order_relaxed);
}

}  // namespace reccl::transport::verbs
