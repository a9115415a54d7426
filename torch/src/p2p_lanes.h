// The point-to-point messages between two ranks travel on lanes, one per direction: a two-rank
// communicator (the sender is its rank 0) with a worker thread of its own, made when the first
// message in that direction is issued (both ends make it then: the sender publishes its unique
// id in the group's store, the receiver's lane picks it up). reccl matches messages in the order
// they were sent, so one direction keeps issue order; other directions and peers never wait for
// it. isend and irecv issued in any order therefore complete as Gloo's do, where one ordered
// worker would wait for ever once a message outgrew the channel's slots. ProcessGroupNCCL keeps
// a communicator per pair for the same reason; one per pair would still order a rank's send
// before its receive.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "comm_worker.h"

namespace reccl_torch {

class PeerLanes {
 public:
  // `group` is the group's worker: a lane still waiting for its peer gives up once the group's
  // communicator failed (a peer that died is seen there at once), not at the group's timeout.
  PeerLanes(c10::intrusive_ptr<c10d::Store> store, int rank, std::chrono::milliseconds timeout,
            std::shared_ptr<FailureLatch> latch, const CommWorker& group);
  // Runs what the lanes have queued, then destroys them (CommWorker's destructor): a lane still
  // waiting for its peer waits on, up to the group's timeout or the group's failure.
  ~PeerLanes();
  PeerLanes(const PeerLanes&) = delete;
  PeerLanes& operator=(const PeerLanes&) = delete;

  // The worker for messages to `peer` (isSend) or from it; made on first use. peer != rank.
  CommWorker& lane(int peer, bool isSend);
  // The peer's rank in a lane's communicator (the sender is 0).
  static int peerInLane(bool isSend) { return isSend ? 1 : 0; }
  // Adds the lanes' counters to `sum` (those that add up; see ProcessGroupReccl::stats);
  // faultSourceStarting is 1 while any lane's is.
  void addStats(recclCommStats_t* sum) const;

 private:
  const c10::intrusive_ptr<c10d::Store> store_;
  const int rank_;
  const std::chrono::milliseconds timeout_;
  const std::shared_ptr<FailureLatch> latch_;
  const CommWorker& group_;  // outlives the lanes (ProcessGroupReccl destroys them first)
  mutable std::mutex mu_;
  std::map<std::pair<int, bool>, std::unique_ptr<CommWorker>> lanes_;  // (peer, isSend), under mu_
};

}  // namespace reccl_torch
