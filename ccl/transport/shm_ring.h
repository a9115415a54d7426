// Shared-memory connections between ranks of the same host: the sender creates a named segment
// holding the connection memory (counters + slots), the receiver maps it and unlinks the name
// right away, so nothing is left in /dev/shm once both sides hold the mapping. Same slot/step/ack
// semantics as TCP: the ports read and write the shared counters directly.
#pragma once

#include <memory>
#include <string>

#include "channel/conn_memory.h"
#include "channel/path.h"
#include "transport/socket_paths.h"

namespace reccl::transport {

// Creator side: a fresh, initialized segment. The name stays linked until the peer mapped it (or
// unlinkShm is called on failure).
Result<channel::ConnMemory> createShm(const std::string& name, uint32_t slots, size_t chunkBytes);
// Peer side: maps and unlinks.
Result<channel::ConnMemory> openShm(const std::string& name, uint32_t slots, size_t chunkBytes);
void unlinkShm(const std::string& name) noexcept;
// Removes /dev/shm/reccl-<pid>-* segments whose creating process is gone (a creator killed in the
// moment between creating a segment and its peer mapping it). Returns how many it removed.
int removeStaleShm() noexcept;

// The Path of a shared-memory connection: data moves through the mapping (the ports ring the
// doorbells themselves); the side-channel socket only tells us when the peer process dies.
class ShmPath final : public channel::Path {
 public:
  ShmPath(SocketEngine* engine, UniqueFd side, channel::PortBase* port, bool isSender, std::string desc);
  void notifyPosted() noexcept override {}
  void notifyConsumed() noexcept override {}
  std::string describe() const override { return desc_; }
  void shutdown() noexcept override { watch_->quiesce(); }

 private:
  std::unique_ptr<LivenessPath> watch_;
  std::string desc_;
};

}  // namespace reccl::transport
