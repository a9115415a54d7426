// What a communicator's failover part sees of the communicator and may do to it: the one door
// between them (the communicator implements it; failover includes nothing else of core::Comm).
// Read-only facts fixed at init (rank, topology, NICs, rank table, key), a snapshot of the
// connection ends failover may move, the transport's path factory, breaking the communicator, and
// the hook every path failure goes through.
//
// Threads: every call is safe from any thread. ports() and portCount() never wait for the
// communicator's port maps (a lazy connect holds them while it connects): they say when they
// could not look at all of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "channel/port.h"
#include "core/auth.h"
#include "core/topology.h"
#include "core/wire.h"
#include "reccl/common/status.h"

namespace reccl::transport {
class PathFactory;
}

namespace reccl::core {

class FailoverHost {
 public:
  virtual ~FailoverHost() = default;

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual const Topology& topology() const = 0;
  // This rank's NIC per rail (index = rail), as the rank table announced them.
  virtual const std::vector<NicInfo>& nics() const = 0;
  virtual const std::vector<RankInfo>& rankTable() const = 0;
  // Geometry of every connection's slot ring (rank 0's, the same on every rank).
  virtual uint32_t slots() const = 0;
  virtual size_t chunkBytes() const = 0;
  // The communicator's identity and key: every connection failover opens proves it
  // (core/handshake.h, docs/security.md).
  virtual uint64_t commId() const = 0;
  virtual const Key& key() const = 0;

  // One connection end failover may move: a network connection (shared-memory ones never move).
  struct NetPort {
    channel::PortBase* port = nullptr;  // lives as long as the communicator
    int peer = -1;
    int channel = 0;
    bool isSender = false;
    int rail = -1;  // the rail its first path was made on (-1: not known)
  };
  struct PortWalk {
    std::vector<NetPort> ports;
    size_t total = 0;    // every port seen, of any kind
    bool whole = true;   // false: a port map was busy, some ports may be missing
  };
  // Ports are only ever added (until the communicator goes): their number is a generation.
  // False when a port map was busy.
  virtual bool portCount(size_t* n) = 0;
  virtual PortWalk ports() = 0;

  // Makes and retires the paths of network connections (socket today; verbs next).
  virtual transport::PathFactory& paths() = 0;

  virtual bool broken() const = 0;
  // No call is running on the communicator now.
  virtual bool idle() const = 0;
  // Fails the communicator with `why` (every port latches it, every blocked call returns).
  virtual void breakComm(const Status& why) = 0;
  // The hook every path failure is offered to first (install / remove: see PathFailureHook).
  virtual channel::PathFailureHook& pathFailureHook() = 0;
};

}  // namespace reccl::core
