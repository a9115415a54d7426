// What a collective algorithm sees of a communicator: ranks, channels and the ports of directed
// connections. Implemented by the communicator (core/comm.h); algorithms never see transports.
#pragma once

#include <cstddef>
#include <functional>

#include "channel/port.h"
#include "reccl/common/deadline.h"
#include "reccl/common/status.h"

namespace reccl::channel {

class ChannelSet {
 public:
  virtual ~ChannelSet() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual int nchannels() const = 0;
  // Ports of the directed connections rank -> peer and peer -> rank on `channel`; the first call
  // connects (both ranks must ask for the matching pair, as every collective does).
  virtual Result<SendPort*> sendPort(int peer, int channel) = 0;
  virtual Result<RecvPort*> recvPort(int peer, int channel) = 0;
  // Deadline for the next wait (RECCL_TIMEOUT_MS from now).
  virtual Deadline stepDeadline() const = 0;
  // Runs fn(0..n-1) on the channel threads and returns the first error: the caller runs fn(0),
  // the workers take the others in index order, so with fewer threads than items some run one
  // after another, always in increasing index (a rank may run them in turn while its peers run
  // them at once: an item must depend only on the same or lower-indexed items of other ranks, as
  // the independent channels of a collective do). fn is copied and should capture by value: a
  // worker that outlives a failed call (see Comm::runParallel) may still be running its copy.
  virtual Status runParallel(int n, const std::function<Status(int)>& fn) = 0;
  // Next collective sequence number (identical on every rank for the same collective).
  virtual uint64_t nextCollSeq() = 0;
  // Messages up to this many bytes use the latency-oriented allreduce.
  virtual size_t smallMessageBytes() const = 0;
  // "ring", "rd" or "" (auto), from RECCL_ALGO.
  virtual const char* forcedAlgo() const = 0;
  // Ring steps of at least this many bytes may be received into / sent from the user's buffers
  // (RECCL_DIRECT_RECV_MIN_BYTES, RECCL_DIRECT_SEND_MIN_BYTES; 0 disables).
  virtual size_t directRecvMinBytes() const = 0;
  virtual size_t directSendMinBytes() const = 0;
};

}  // namespace reccl::channel
