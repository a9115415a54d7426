#include "api/group.h"

#include <algorithm>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "algo/collectives.h"
#include "api/api_result.h"
#include "api/comm_handle.h"
#include "api/launch.h"

namespace reccl::api {
namespace {

using algo::CollKind;
using algo::Collective;

struct Queued {
  recclComm_t comm;
  Collective coll;  // a collective, or one send/receive (kSendRecv with one op)
  recclStream_t stream;
};
thread_local int tlsDepth = 0;
thread_local std::vector<Queued> tlsQueued;
thread_local std::string tlsDropped;  // why this group cannot run (forgetQueued)

// One communicator's share of a group: its collectives in call order, then all its
// sends/receives as one operation (as when only sends/receives were queued and collectives ran
// at their call).
struct CommWork {
  recclComm_t comm;
  std::vector<std::pair<Collective, recclStream_t>> collectives;
  Collective p2p{CollKind::kSendRecv, nullptr, nullptr, 0, recclUint8, recclSum, 0, {}};
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

void groupStart() noexcept { ++tlsDepth; }

bool inGroup() noexcept { return tlsDepth > 0; }

void queue(recclComm_t comm, const Collective& c, recclStream_t stream) { tlsQueued.push_back({comm, c, stream}); }

void forgetQueued(recclComm_t comm) {
  if (tlsDepth == 0) return;
  auto gone = std::remove_if(tlsQueued.begin(), tlsQueued.end(), [&](const Queued& q) { return q.comm == comm; });
  size_t n = static_cast<size_t>(tlsQueued.end() - gone);
  if (n == 0) return;
  tlsQueued.erase(gone, tlsQueued.end());
  if (tlsDropped.empty())
    tlsDropped = "comm: destroyed or aborted inside the group with " + std::to_string(n) +
                 " operation(s) queued; the group ran nothing";
}

recclResult_t groupEnd() {
  if (tlsDepth == 0) return fail(recclInvalidUsage, "recclGroupEnd without recclGroupStart");
  if (--tlsDepth > 0) return recclSuccess;
  std::vector<Queued> ops = std::exchange(tlsQueued, {});
  if (std::string why = std::exchange(tlsDropped, {}); !why.empty()) return fail(recclInvalidUsage, why);

  std::vector<CommWork> work;  // in order of each communicator's first call
  for (Queued& q : ops) {
    auto w = std::find_if(work.begin(), work.end(), [&](const CommWork& x) { return x.comm == q.comm; });
    if (w == work.end()) w = work.insert(work.end(), CommWork{q.comm, {}});
    if (q.coll.kind != CollKind::kSendRecv) {
      w->collectives.emplace_back(std::move(q.coll), q.stream);
    } else if (!w->p2p.p2p.empty() && w->p2pStream != q.stream) {
      return fail(recclInvalidUsage,
                  "stream: the sends and receives of one group on one communicator must use one stream");
    } else {
      w->p2pStream = q.stream;
      w->p2p.p2p.push_back(q.coll.p2p.front());
    }
  }
  // Every communicator must take its work before any starts: a refused call runs nothing, and
  // leaves the communicators as they were.
  for (const CommWork& w : work) {
    core::Comm* impl = nullptr;
    RECCL_CHECK(usable(w.comm, &impl));
    RECCL_CHECK(finish(algo::checkSelfPairs(w.p2p.p2p, impl->rank())));
  }
  if (work.size() == 1) return finish(runWork(work[0]));

  std::vector<Status> result(work.size());
  std::vector<std::thread> threads;
  threads.reserve(work.size());
  const int device = callerDevice();  // device buffers with a NULL stream go to the caller's GPU
  size_t started = 0;
  for (; started < work.size(); ++started) {
    try {
      threads.emplace_back([&result, &work, started, device] {
        useDevice(device);
        result[started] = runWork(work[started]);
      });
    } catch (const std::system_error&) {
      break;  // the rest run here, one after another (their peers' deadlines bound any wait)
    }
  }
  for (size_t i = started; i < work.size(); ++i) result[i] = runWork(work[i]);
  for (auto& t : threads) t.join();
  for (const Status& s : result)
    if (!s.ok()) return fail(s);
  return recclSuccess;
}

}  // namespace reccl::api
