// Client of reccl-detectord: what the library's monitor thread and `reccl detector status` use
// when a node daemon runs. Requests are synchronous with a deadline; events that arrive while
// waiting for a reply are kept for receive(). Liveness: keepAlive() pings the daemon on the same
// socket and fails when a pong is late, so a daemon that hangs without closing its socket is
// noticed like one that died. Nothing received is dropped: receive() hands over every event that
// arrived before an error, and a message that is not a whole, well-formed event or reply is an
// error (the caller falls back and reconciles), never skipped.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "reccl/detector/detector.h"

namespace reccl::detector {

// The daemon's link-state array mapped read-only in this process.
class MappedLinkState {
 public:
  MappedLinkState(const reccl_link_slot* slots, size_t bytes) : slots_(slots), bytes_(bytes) {}
  ~MappedLinkState();
  MappedLinkState(const MappedLinkState&) = delete;
  MappedLinkState& operator=(const MappedLinkState&) = delete;
  const reccl_link_slot* slots() const { return slots_; }
  uint64_t epoch(uint32_t slot) const {
    return slot < RECCL_LINK_MAX_SLOTS ? __atomic_load_n(&slots_[slot].epoch, __ATOMIC_ACQUIRE) : 0;
  }

 private:
  const reccl_link_slot* slots_;
  size_t bytes_;
};

class DetectorClient {
 public:
  static Result<std::unique_ptr<DetectorClient>> connect(const std::string& path, int timeoutMs = 2000);

  // Opens spec.netns itself ("" is this process's namespace) and hands the daemon the open
  // descriptor, so only a namespace this process may open can be watched.
  Result<WatchedLink> watch(const WatchSpec& spec);
  Status unwatch(LinkKey key);
  Result<std::string> statusJson();
  Result<std::unique_ptr<MappedLinkState>> mapLinkState();
  // Readable when an event (or anything) arrives from the daemon.
  int fd() const { return sock_.get(); }
  // Appends the events received so far plus those arriving within timeoutMs (0: only what is
  // there) to *out. On an error (daemon gone, garbled or truncated message) the events that
  // arrived before it are in *out all the same.
  Status receive(int timeoutMs, std::vector<LinkEvent>* out);
  // Liveness, without blocking: sends a ping when none is outstanding and periodMs passed since
  // the last pong; kTimeout when the outstanding ping has had no pong for deadlineMs. Pongs are
  // read by receive() (and by every request), so call receive() when fd() is readable.
  Status keepAlive(int periodMs, int deadlineMs);
  // Pongs received so far.
  uint64_t pongs() const { return pongs_; }
  const std::string& hello() const { return hello_; }

 private:
  DetectorClient() = default;
  // sendFd >= 0 travels with the request (SCM_RIGHTS).
  Result<std::string> request(const std::string& json, const std::string& op, UniqueFd* fd = nullptr, int sendFd = -1);
  Status pump(int timeoutMs, const std::string& wantOp, std::string* reply, UniqueFd* fd);
  void onPong(uint64_t seq);

  UniqueFd sock_;
  int timeoutMs_ = 2000;
  std::deque<LinkEvent> events_;
  std::string hello_;
  uint64_t pingSeq_ = 0;
  uint64_t pingSentNs_ = 0;     // 0: no ping outstanding
  uint64_t lastAliveNs_ = 0;    // last pong (or the hello)
  uint64_t pongs_ = 0;
};

}  // namespace reccl::detector
