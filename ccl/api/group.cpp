#include "api/group.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "algo/collectives.h"
#include "algo/cost.h"
#include "api/api_result.h"
#include "api/comm_handle.h"
#include "api/launch.h"
#include "reccl/common/log.h"

namespace reccl::api {
namespace {

using algo::CollKind;
using algo::Collective;

struct Queued {
  recclComm_t comm;
  Collective coll;  // a collective, or sends/receives (kSendRecv: one, or a gather's or scatter's)
  recclStream_t stream;
};

// One thread's group. Every thread's open group is listed process-wide, so that a communicator
// destroyed or aborted on any thread (a watchdog's recclCommAbort) leaves no queued call of
// another thread's group pointing at the freed handle. `depth` is the owner's alone; the rest is
// guarded by groupsMu().
struct OpenGroup {
  int depth = 0;
  std::vector<Queued> queued;
  std::string dropped;  // why this group cannot run (forgetQueued)
  OpenGroup();
  ~OpenGroup();
};

// Never destroyed: a thread may end (and unlist its group) after static destructors ran.
std::mutex& groupsMu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<OpenGroup*>& groups() {
  static auto* list = new std::vector<OpenGroup*>;
  return *list;
}

OpenGroup::OpenGroup() {
  std::lock_guard lk(groupsMu());
  groups().push_back(this);
}

// A thread that ends inside recclGroupStart drops its queued calls, as NCCL does; their peers
// wait out their own deadlines, so the drop is said where the cause is.
OpenGroup::~OpenGroup() {
  size_t n = 0;
  {
    std::lock_guard lk(groupsMu());
    std::erase(groups(), this);
    n = queued.size();
  }
  if (depth > 0 && n > 0)
    RECCL_WARN(kLogColl, "a thread ended inside recclGroupStart with %zu operation(s) queued; they were dropped "
               "without running (their peers wait out RECCL_TIMEOUT_MS)", n);
}

thread_local OpenGroup tlsGroup;

// One communicator's share of a group: its collectives in call order, then all its
// sends/receives as one operation (as when only sends/receives were queued and collectives ran
// at their call).
struct CommWork {
  recclComm_t comm;
  std::vector<std::pair<Collective, recclStream_t>> collectives;
  Collective p2p{CollKind::kSendRecv, nullptr, nullptr, 0, recclUint8, recclSum, 0, {}, {}};
  recclStream_t p2pStream = nullptr;
};

Status runWork(const CommWork& w) noexcept {
  try {
    for (const auto& [c, stream] : w.collectives) RECCL_TRY(launch(*w.comm, c, stream));
    return w.p2p.p2p.empty() ? Status::Ok() : launch(*w.comm, w.p2p, w.p2pStream);
  } catch (...) {
    return caughtException();
  }
}

}  // namespace

void groupStart() noexcept { ++tlsGroup.depth; }

bool inGroup() noexcept { return tlsGroup.depth > 0; }

void queue(recclComm_t comm, const Collective& c, recclStream_t stream) {
  OpenGroup& g = tlsGroup;  // made (and listed, under groupsMu) before the lock is taken here
  std::lock_guard lk(groupsMu());
  g.queued.push_back({comm, c, stream});
}

void forgetQueued(recclComm_t comm) {
  std::lock_guard lk(groupsMu());
  for (OpenGroup* g : groups()) {
    size_t n = std::erase_if(g->queued, [&](const Queued& q) { return q.comm == comm; });
    if (n > 0 && g->dropped.empty())
      g->dropped = "comm: destroyed or aborted inside the group with " + std::to_string(n) +
                   " operation(s) queued; the group ran nothing";
  }
}

namespace {

// The outermost end's first part, shared by recclGroupEnd and recclGroupSimulateEnd: the thread's
// queued operations per communicator (in order of each one's first call), every communicator
// held (CallTicket) and usable. An error ends the group, leaving the communicators as they were.
recclResult_t takeWork(std::vector<CommWork>* work, std::vector<CallTicket>* held) {
  std::vector<Queued> ops;
  std::string why;
  {
    OpenGroup& g = tlsGroup;
    std::lock_guard lk(groupsMu());
    ops = std::exchange(g.queued, {});
    why = std::exchange(g.dropped, {});
  }
  if (!why.empty()) return fail(recclInvalidUsage, why);

  for (Queued& q : ops) {
    auto w = std::find_if(work->begin(), work->end(), [&](const CommWork& x) { return x.comm == q.comm; });
    if (w == work->end()) w = work->insert(work->end(), CommWork{q.comm, {}});
    if (q.coll.kind != CollKind::kSendRecv) {
      w->collectives.emplace_back(std::move(q.coll), q.stream);
    } else if (!w->p2p.p2p.empty() && w->p2pStream != q.stream) {
      return fail(recclInvalidUsage,
                  "stream: the sends and receives of one group on one communicator must use one stream");
    } else {
      w->p2pStream = q.stream;
      w->p2p.p2p.insert(w->p2p.p2p.end(), q.coll.p2p.begin(), q.coll.p2p.end());  // a gather or scatter: several
    }
  }
  // Every communicator must take its work before any starts: a refused call runs nothing, and
  // leaves the communicators as they were. Each is held until its work has run: a close on
  // another thread waits for it.
  held->reserve(work->size());
  for (const CommWork& w : *work) {
    if (!held->emplace_back(w.comm)) return refusedClosed();
    core::Comm* impl = nullptr;
    RECCL_CHECK(usable(w.comm, &impl));
    RECCL_CHECK(finish(algo::checkSelfPairs(w.p2p.p2p, impl->rank())));
  }
  return recclSuccess;
}

Status checkSimInfo(const recclSimInfo_t* info) {
  if (!info) return Status(Errc::kInvalidArgument, "simInfo: null pointer");
  if (info->magic != RECCL_SIM_INFO_MAGIC || info->size < sizeof(recclSimInfo_t))
    return Status(Errc::kInvalidArgument,
                  "simInfo: not initialized (its size and magic): set it to RECCL_SIM_INFO_INITIALIZER first");
  return Status::Ok();
}

}  // namespace

recclResult_t groupEnd() {
  if (tlsGroup.depth == 0) return fail(recclInvalidUsage, "recclGroupEnd without recclGroupStart");
  if (--tlsGroup.depth > 0) return recclSuccess;
  std::vector<CommWork> work;
  std::vector<CallTicket> held;
  RECCL_CHECK(takeWork(&work, &held));
  if (work.size() == 1) return finish(runWork(work[0]));

  std::vector<Status> result(work.size());
  std::vector<std::thread> threads;
  threads.reserve(work.size());
  const int device = callerDevice();  // device buffers with a NULL stream go to the caller's GPU
  size_t started = 0;
  for (; started < work.size(); ++started) {
    try {
      threads.emplace_back([&result, &work, &held, started, device] {
        useDevice(device);
        result[started] = runWork(work[started]);
        held[started].release();  // a close waiting for this communicator need not wait for the others
      });
    } catch (const std::system_error&) {
      break;  // the rest run here, one after another (their peers' deadlines bound any wait)
    }
  }
  for (size_t i = started; i < work.size(); ++i) {
    result[i] = runWork(work[i]);
    held[i].release();
  }
  for (auto& t : threads) t.join();
  for (const Status& s : result)
    if (!s.ok()) return fail(s);
  return recclSuccess;
}

recclResult_t groupSimulateEnd(recclSimInfo_t* info) {
  RECCL_CHECK(finish(checkSimInfo(info)));
  if (tlsGroup.depth == 0) return fail(recclInvalidUsage, "recclGroupSimulateEnd without recclGroupStart");
  if (--tlsGroup.depth > 0) return recclSuccess;
  std::vector<CommWork> work;
  std::vector<CallTicket> held;
  RECCL_CHECK(takeWork(&work, &held));
  // Each communicator's operations one after another, the communicators at once (as groupEnd
  // runs them): the group lasts as long as its longest communicator's share.
  double longest = 0;
  for (const CommWork& w : work) {
    const core::Comm& impl = *w.comm->impl;
    double seconds = 0;
    for (const auto& [c, stream] : w.collectives) seconds += w.comm->cost.estimateSeconds(algo::costOf(impl, c));
    if (!w.p2p.p2p.empty()) seconds += w.comm->cost.estimateSeconds(algo::costOf(impl, w.p2p));
    longest = std::max(longest, seconds);
  }
  info->estimatedTime = static_cast<float>(longest * 1e6);
  return recclSuccess;
}

}  // namespace reccl::api
