// The verbs transport behind the failover's path factory (transport/path_factory.h): a link is
// a side channel (a TCP link from the TCP factory: same NICs, the peer's data listener, so the
// authenticated hello and the migration handshake ride on it as on TCP) plus, once the records
// are exchanged, an RC QP on the link's rail connected to the peer's. Paths are VerbsSendPath /
// VerbsRecvPath on the factory's progress thread. The communicator makes its first connections
// through the same Link steps (docs/verbs.md, "How the communicator uses it").
//
// Owns, per communicator: every rail's RailDevice, one ConnRegistration per connection end (its
// slots on every rail's PD, made when the end's first record is sent: a migration registers
// nothing), the progress thread and a reaper that retires drained paths (QP to ERR already;
// drain the flushes, destroy the QP) off the fault's path.
//
// Records and the "ready" byte: an end connects its QP (RTR, RTS) when it takes the peer's
// record, and the passive end of a handshake takes it before it sends its own, so an initiating
// sender may write as soon as it has the passive receiver's record. A passive sender commits on
// the request and must not write before the initiating receiver's QP is at RTR and its old path
// in ERR (docs/verbs.md, "Migration", rule 2): the initiating receiver writes one byte after it
// took the record, and the passive sender's makePath reads it (bounded).
//
// Threads: safe from any thread; a Link belongs to its holder. Destruction order: stop() (after
// failover stopped, before the ports go), the ports, then the factory (registrations, devices).
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/path_factory.h"
#include "transport/verbs/conn_registration.h"
#include "transport/verbs/qp_settings.h"
#include "transport/verbs/rail_device.h"
#include "transport/verbs/verbs_paths.h"
#include "transport/verbs/verbs_progress.h"

namespace reccl::transport::verbs {

struct VerbsPathFactoryConfig {
  PathFactory* sideChannel = nullptr;  // the TCP factory: outlives this one
  std::vector<std::string> railNics;   // this rank's NIC per rail
  QpSettings settings;
  int gidIndex = -1;                   // RECCL_IB_GID_INDEX
  VerbsPathOptions pathOptions;
};

class VerbsPathFactory final : public PathFactory {
 public:
  // Opens every rail's device (its port may be down now: it may come back) and starts the
  // progress thread and the reaper.
  static Result<std::unique_ptr<VerbsPathFactory>> create(VerbsPathFactoryConfig cfg);
  ~VerbsPathFactory() override;

  const char* name() const noexcept override { return "verbs"; }
  Result<std::unique_ptr<Link>> connect(int peer, int rail, Deadline deadline) override;
  std::unique_ptr<Link> accept(UniqueFd fd) override;
  std::unique_ptr<Link> acceptStream(UniqueFd fd) override;
  std::unique_ptr<Link> adopt(std::unique_ptr<Link> stream) override;
  int railOf(const channel::Path& path) const override;
  void watch(const channel::Path& path, int64_t stallMs) const override;
  PathSample sample(const channel::Path& path, int64_t stallMs) const override;
  LossSample loss(const channel::Path& path) const override;
  void stop() noexcept override;

  // The registration of `port`'s slots on every rail (made on first use).
  Result<const ConnRegistration*> registration(channel::PortBase& port, bool isSender);
  RailDevice* rail(int r) const noexcept {
    return r >= 0 && static_cast<size_t>(r) < rails_.size() ? rails_[r].get() : nullptr;
  }
  int nrails() const noexcept { return static_cast<int>(rails_.size()); }
  const VerbsPathFactoryConfig& config() const noexcept { return cfg_; }
  // Hands a drained path to the reaper (retire: drain its flushes, destroy its QP).
  void reap(VerbsPath* path);
  // Reports `path`'s failure to its port from the reaper, kStartFailureDelayMs from now: a path
  // that fails as it starts does so inside a failover commit, which would take the report for
  // its own retirement of the old path and drop it.
  void failLater(channel::PortBase* port, channel::Path* path, bool isSender, Status why);
  VerbsProgress* engine() const noexcept { return engine_.get(); }
  // Where the paths' QPs are destroyed (VerbsPath::attach); the registrations and devices follow
  // them there when the factory goes.
  const std::shared_ptr<Graveyard>& graveyard() const noexcept { return graveyard_; }
  // The rail devices' async event descriptors, for a fault source (IBV_EVENT_PORT_ERR).
  std::vector<RailDevice*> railDevices() const;

 private:
  explicit VerbsPathFactory(VerbsPathFactoryConfig cfg) : cfg_(std::move(cfg)) {}
  void reaperLoop();

  VerbsPathFactoryConfig cfg_;
  std::vector<std::unique_ptr<RailDevice>> rails_;
  std::mutex regMu_;  // guards regs_
  std::map<const channel::PortBase*, std::unique_ptr<ConnRegistration>> regs_;
  std::unique_ptr<VerbsProgress> engine_;
  std::shared_ptr<Graveyard> graveyard_;
  std::mutex reapMu_;  // guards reapQ_, stopping_
  std::condition_variable reapCv_;
  std::deque<VerbsPath*> reapQ_;
  struct LateFailure {
    channel::PortBase* port;
    channel::Path* path;
    bool isSender;
    Status why;
    Deadline due;
  };
  std::deque<LateFailure> failQ_;
  bool stopping_ = false;
  std::thread reaper_;
};

}  // namespace reccl::transport::verbs
