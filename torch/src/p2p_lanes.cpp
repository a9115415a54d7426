#include "p2p_lanes.h"

#include <optional>
#include <string>
#include <utility>

#include "store_bootstrap.h"

namespace reccl_torch {

PeerLanes::PeerLanes(c10::intrusive_ptr<c10d::Store> store, int rank, std::chrono::milliseconds timeout,
                     std::shared_ptr<FailureLatch> latch, const CommWorker& group)
    : store_(std::move(store)), rank_(rank), timeout_(timeout), latch_(std::move(latch)), group_(group) {}

PeerLanes::~PeerLanes() {
  std::map<std::pair<int, bool>, std::unique_ptr<CommWorker>> lanes;
  {
    std::lock_guard lk(mu_);
    lanes.swap(lanes_);
  }
  lanes.clear();
}

CommWorker& PeerLanes::lane(int peer, bool isSend) {
  std::lock_guard lk(mu_);
  auto& worker = lanes_[{peer, isSend}];
  if (!worker) {
    const int src = isSend ? rank_ : peer;
    const int dst = isSend ? peer : rank_;
    const std::string key = "reccl_torch/lane/" + std::to_string(src) + "-" + std::to_string(dst);
    const std::string what = (isSend ? "send to rank " : "recv from rank ") + std::to_string(peer);
    // The store outlives the worker: the group holds this object, and the object the store.
    c10d::Store* store = store_.get();
    const CommWorker* group = &group_;
    worker = std::make_unique<CommWorker>(
        [store, group, latch = latch_, key, isSend, rank = rank_, peer, src, timeout = timeout_, what](
            recclComm_t* comm) {
          // Not on the group's destruction: like gloo's, it runs what the lanes hold.
          GiveUp giveUp = [latch, group, peer]() -> std::optional<std::string> {
            if (auto why = latch->get()) return "the process group failed (" + *why + ")";
            if (auto why = group->cannotReach(peer)) return "the process group's communicator " + *why;
            return std::nullopt;
          };
          return openPairComm(*store, key, isSend, rank, src, timeout, giveUp, what, comm);
        },
        rank_, latch_);
  }
  return *worker;
}

void PeerLanes::addStats(recclCommStats_t* sum) const {
  std::lock_guard lk(mu_);
  for (const auto& entry : lanes_) {
    recclCommStats_t s{};
    if (!entry.second->stats(&s)) continue;
    sum->collectives += s.collectives;
    sum->bytesSent += s.bytesSent;
    sum->bytesReceived += s.bytesReceived;
    sum->failovers += s.failovers;
    sum->failbacks += s.failbacks;
    sum->bytesResent += s.bytesResent;
    sum->duplicateSteps += s.duplicateSteps;
    sum->relayMigrations += s.relayMigrations;
    sum->standbyFailovers += s.standbyFailovers;
    sum->faultSourceStarting |= s.faultSourceStarting;
    sum->lostConnections += s.lostConnections;
    if (s.lastFailoverSignalNs > sum->lastFailoverSignalNs) {  // the latest failover's
      sum->lastFailoverSignalNs = s.lastFailoverSignalNs;
      sum->lastFailoverUs = s.lastFailoverUs;
    }
  }
}

}  // namespace reccl_torch
