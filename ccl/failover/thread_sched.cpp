#include "failover/thread_sched.h"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "reccl/common/log.h"

namespace reccl::failover {

namespace {

// The kernel's struct sched_attr, first version (SCHED_ATTR_SIZE_VER0, 48 bytes): declared here
// because its header clashes with the C library's on some distributions.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;  // SCHED_DEADLINE runtime; at a fair policy, the slice (0: default)
  uint64_t sched_deadline;
  uint64_t sched_period;
};
static_assert(sizeof(SchedAttr) == 48);

constexpr uint64_t kMinSliceNs = 100'000;       // the kernel's clamp of a requested slice
constexpr uint64_t kMaxSliceNs = 100'000'000;

bool getAttr(SchedAttr* a) {
  *a = {};
  return syscall(SYS_sched_getattr, 0, a, sizeof *a, 0) == 0;
}

int setAttr(SchedAttr* a) {
  a->size = sizeof *a;
  a->sched_flags = 0;
  return syscall(SYS_sched_setattr, 0, a, 0) == 0 ? 0 : errno;
}

bool fairPolicy(uint32_t p) { return p == SCHED_OTHER || p == SCHED_BATCH; }

}  // namespace

Status raiseToFifo(int prio) {
  sched_param sp{};
  sp.sched_priority = prio;
  int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
  if (rc != 0)
    return Status(rc == EPERM ? Errc::kPermission : Errc::kInvalidArgument,
                  std::string("SCHED_FIFO ") + std::to_string(prio) + ": " + strerror(rc));
  return Status::Ok();
}

Status requestSlice(uint64_t ns) {
  std::string what = "a " + std::to_string(ns / 1000) + " us slice";
  if (ns < kMinSliceNs || ns > kMaxSliceNs)
    return Status(Errc::kInvalidArgument, what + ": the kernel takes 100 us to 100 ms");
  SchedAttr a{};
  if (!getAttr(&a)) return Status::FromErrno(errno, what + ": sched_getattr");
  if (!fairPolicy(a.sched_policy))
    return Status(Errc::kInvalidArgument, what + ": the thread is not at SCHED_OTHER or SCHED_BATCH");
  a.sched_runtime = ns;  // policy and nice as read, so neither changes
  if (int e = setAttr(&a)) return Status::FromErrno(e, what + ": sched_setattr");
  // A kernel without custom slices accepts the call and ignores sched_runtime: read it back.
  if (!getAttr(&a)) return Status::FromErrno(errno, what + ": sched_getattr");
  if (a.sched_runtime != ns)
    return Status(Errc::kUnsupported, what + ": this kernel ignores it (custom slices need EEVDF, Linux 6.12+)");
  return Status::Ok();
}

void dropToNormalScheduling() noexcept {
  SchedAttr a{};
  if (!getAttr(&a)) return;
  if (a.sched_policy == SCHED_FIFO || a.sched_policy == SCHED_RR) {
    sched_param sp{};
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
    return;
  }
  if (!fairPolicy(a.sched_policy)) return;
  a.sched_runtime = 0;  // the kernel's default slice again
  setAttr(&a);
}

void ControlThreads::enter(const char* what, const char* threadName) {
  pthread_setname_np(pthread_self(), threadName);
  if (rtPrio_ > 0) {
    Status s = raiseToFifo(rtPrio_);
    if (s.ok()) return;
    if (!rtLogged_.exchange(true))
      RECCL_INFO(kLogFailover, "rank %d: RECCL_FAILOVER_RT_PRIO=%d: SCHED_FIFO for the %s thread refused (%s); normal scheduling",
                 rank_, rtPrio_, what, s.message().c_str());
  }
  if (sliceNs_ == 0) return;
  Status s = requestSlice(sliceNs_);
  if (!s.ok() && !sliceLogged_.exchange(true))
    RECCL_INFO(kLogFailover, "rank %d: RECCL_FAILOVER_SLICE_US: the %s thread keeps the default slice (%s)", rank_,
               what, s.message().c_str());
}

}  // namespace reccl::failover
