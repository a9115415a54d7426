#include "failover/thread_sched.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace reccl::failover {

Status raiseToFifo(int prio) {
  sched_param sp{};
  sp.sched_priority = prio;
  int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
  if (rc != 0)
    return Status(rc == EPERM ? Errc::kPermission : Errc::kInvalidArgument,
                  std::string("SCHED_FIFO ") + std::to_string(prio) + ": " + strerror(rc));
  return Status::Ok();
}

void dropToNormalScheduling() noexcept {
  int policy = SCHED_OTHER;
  sched_param sp{};
  if (pthread_getschedparam(pthread_self(), &policy, &sp) != 0) return;
  if (policy != SCHED_FIFO && policy != SCHED_RR) return;
  sp.sched_priority = 0;
  pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
}

}  // namespace reccl::failover
