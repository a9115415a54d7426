// A communicator: bootstrap result, topology, the data listener, the progress engine and the
// directed connections (ports) of every channel. It implements channel::ChannelSet, the only
// thing algorithms see.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "channel/channel_set.h"
#include "channel/port.h"
#include "core/auth.h"
#include "core/comm_stats.h"
#include "core/failover_host.h"
#include "core/failover_part.h"
#include "core/topology.h"
#include "core/wire.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "transport/socket_engine.h"
#include "transport/socket_path_factory.h"
#include "transport/socket_util.h"

namespace reccl::core {

class BootstrapRoot;

// Settings of one communicator; fromEnv() reads the RECCL_* table.
struct CommOptions {
  size_t chunkBytes = 512 * 1024;
  uint32_t slots = 8;
  int nchannels = 0;
  int channelThreads = 0;  // RECCL_CHANNEL_THREADS (0: auto; core::rankChannelThreads)
  bool shmDisable = false;
  int64_t timeoutMs = 60000;
  int64_t bootstrapTimeoutMs = 30000;
  std::string nics;
  // Set: the channels this rank sends on start on that NIC's rail (RankInfo::homeRail, railFor);
  // the other NICs are their failover targets. Rails still pair NICs by their place in each
  // rank's list. The NCCL net plugin's per-NIC devices. A NIC `nics` does not select (down, or
  // left out) is warned of and ignored.
  std::string homeNic;
  size_t smallMsgBytes = 64 * 1024;
  size_t directRecvMinBytes = 64 * 1024;
  size_t directSendMinBytes = 64 * 1024;
  std::string algo;
  // The communicator's failover part (failover::makeFailover; the api layer sets it). Empty, or
  // RECCL_FAILOVER=0: none, and a path fault fails the communicator.
  FailoverMaker makeFailover;
  // Set: init gives up (Errc::kAborted) once it is true, within Deadline::kCancelPollMs of any
  // wait (an abort of a non-blocking init; api/comm_handle.h).
  std::shared_ptr<const std::atomic<bool>> cancelInit;
  static Status fromEnv(CommOptions* out);
};


// Lock rule: sendMu_ guards sends_ and sendRail_ and is held for the whole of a lazy connect;
// recvMu_ guards recvs_ and recvRail_ and is held while recvPort waits for the peer's connection;
// inMu_ guards incoming_ (the listener's hand-over); workMu_ the channel workers' queue and
// batches; activeMu_ the count of calls in flight; errMu_ the latched error. Order where two are
// held: recvMu_ -> sendMu_ and recvMu_ -> inMu_ (recvPort), sendMu_ -> dialMu_ (sendPort),
// sendMu_ / recvMu_ -> errMu_ (closePortsLeftOpen), workMu_ -> activeMu_ (a worker that outlived
// its call). breakComm, portCount and ports only try_lock the port maps: they run on threads
// that may hold them or wait for them (a path's failure, the failover's monitor).
class Comm final : public channel::ChannelSet, private FailoverHost {
 public:
  // Joins the communicator described by `id` as `rank` of `nranks`. `root`, when given, is the
  // bootstrap root this rank started at a launcher's fixed address: the communicator keeps it
  // (the address stays taken) and fails when it reports a late claim (two jobs on one address).
  // `ids`: one rendezvous, or recclCommInitRankScalable's one per bootstrap root (core/bootstrap.h).
  static Result<std::unique_ptr<Comm>> create(const CommOptions& opts, std::span<const UniqueIdData> ids, int nranks,
                                              int rank, std::shared_ptr<BootstrapRoot> root = nullptr);
  ~Comm() override;

  // channel::ChannelSet
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  int nchannels() const override { return topo_.nchannels; }
  Result<channel::SendPort*> sendPort(int peer, int channel) override;
  Result<channel::RecvPort*> recvPort(int peer, int channel) override;
  Deadline stepDeadline() const override { return Deadline::afterMs(opts_.timeoutMs); }
  Status runParallel(int n, const std::function<Status(int)>& fn) override;
  uint64_t nextCollSeq() override { return ++collSeq_; }
  size_t smallMessageBytes() const override { return opts_.smallMsgBytes; }
  const char* forcedAlgo() const override { return opts_.algo.c_str(); }
  size_t directRecvMinBytes() const override { return opts_.directRecvMinBytes; }
  size_t directSendMinBytes() const override { return opts_.directSendMinBytes; }

  // Runs one operation: refuses when the communicator is broken, and breaks it (failing every
  // connection, so peers notice at once) when the operation fails.
  Status run(const std::function<Status()>& op);
  // Stops everything; waits for calls in flight on other threads to return. Safe from any thread.
  void abort();
  // recclCommRevoke: stops everything as abort() does (the calls in flight fail naming the revoke)
  // without waiting for them; quiet() tells when they have returned. Safe from any thread.
  void revoke();
  bool quiet() const { return active_.load() == 0; }
  // First fatal error (Ok if none).
  Status asyncError() const;
  // This rank's connections to `peer` were lost for good (PortEnv::recordLoss).
  bool peerLost(int peer) const { return env_.peerLost(peer); }
  CommStats stats() const;
  const Topology& topology() const override { return topo_; }
  const std::vector<RankInfo>& rankTable() const override { return table_; }
  const CommOptions& options() const { return opts_; }
  // Connections refused by this communicator's data listener.
  uint64_t refusedConnections() const { return refused_.load(); }
  // Connection ends (send and receive ports) this communicator has made so far: a call during
  // which it grew paid for its connections (api/cost_model.h leaves such a call out).
  uint64_t portsMade() const { return portsMade_.load(std::memory_order_relaxed); }
  transport::Endpoint dataEndpoint() const { return dataEp_; }

  // recclCommShrink (api/shrink.cpp, core/comm_shrink.cpp). The serial of this rank's next shrink
  // that excludes the ranks `digest` names (shrinkDigest): a rank that was excluded before, or that
  // took part in other shrinks, counts this list's shrinks alike with every other caller, so
  // (digest, serial) names one shrink job-wide.
  uint32_t nextShrinkSerial(const std::array<std::byte, kShrinkDigestBytes>& digest);
  // A shrink this rank counted and will take the note of (a non-blocking one's take may come
  // after a later shrink's): while the claim lives, that note outlives the later takes' sweep of
  // notes meant for calls this rank gave up. Made when a call is past its refusals, kept until its
  // take ends; it must not outlive the communicator.
  class ShrinkClaim {
   public:
    ShrinkClaim(Comm& comm, const std::array<std::byte, kShrinkDigestBytes>& digest, uint32_t serial);
    ~ShrinkClaim();
    ShrinkClaim(const ShrinkClaim&) = delete;
    ShrinkClaim& operator=(const ShrinkClaim&) = delete;

   private:
    Comm& comm_;
    std::multiset<std::pair<std::array<std::byte, kShrinkDigestBytes>, uint32_t>>::iterator it_;
  };
  // The leader's word to `peer`: `note`, on a connection of its own to the peer's data listener
  // (authenticated as every data connection), dialled on each rail in turn until one answers or
  // `d` passes. It needs none of this communicator's connections, which a dead rank may have
  // broken.
  Status sendShrinkNote(int peer, uint32_t serial, const ShrinkNote& note, Deadline d);
  // The note of shrink (digest, serial), once this rank's listener took it from `leader`; refused
  // when another rank sent it, or when the leader's note for this serial names other excluded
  // ranks (the ranks disagree on who is left). Older notes of the same list are dropped unless
  // a ShrinkClaim holds them.
  Result<ShrinkNote> takeShrinkNote(const std::array<std::byte, kShrinkDigestBytes>& digest, uint32_t serial,
                                    int leader, Deadline d);
  // What a shrink note says of the excluded ranks (sorted, no repeats): a digest the survivors
  // compare, so ranks that passed different lists fail instead of forming different groups.
  static std::array<std::byte, kShrinkDigestBytes> shrinkDigest(const std::vector<int>& excluded);

 private:
  // FailoverHost: what the failover part sees of this communicator (core/failover_host.h).
  const std::vector<NicInfo>& nics() const override { return myNics_; }
  uint32_t slots() const override { return opts_.slots; }
  size_t chunkBytes() const override { return opts_.chunkBytes; }
  uint64_t commId() const override { return commId_; }
  const Key& key() const override { return key_; }
  bool portCount(size_t* n) override;
  PortWalk ports() override;
  transport::PathFactory& paths() override { return verbs_ ? *verbs_ : *paths_; }
  bool broken() const override { return broken_.load(); }
  bool idle() const override { return active_.load() == 0; }
  channel::PathFailureHook& pathFailureHook() override { return env_.pathFailureHook; }

  struct Incoming {
    UniqueFd fd;
    Hello hello;
    channel::ConnMemory shm;
    std::unique_ptr<channel::RecvPort> port;  // verbs: made and connected by the listener
  };
  using PortKey = std::pair<int, int>;  // (peer, channel)
  static constexpr uint32_t kFlagShmDisable = 1;  // RankInfo::flags: this rank takes no shared memory

  Comm() = default;
  Status init(std::span<const UniqueIdData> ids, int nranks, int rank);
  // The socket of a new data connection to `peer`, from this rank's NIC on a rail to the peer's
  // NIC on the same rail: `preferred` first, then (with failover) the other rails known healthy,
  // each dialled for the failover's per-rail time in turn. *rail: the rail it was made on.
  Result<UniqueFd> dialData(int peer, int preferred, Deadline d, int* rail);
  // A lazy connect's failure `s` as its call returns it: the communicator's error once it failed.
  Status connectFailure(const Status& s, int peer) const;
  void listenLoop();
  Status handleHello(UniqueFd fd, const Hello& h);
  // A kShrink hello's note, read, kept for takeShrinkNote and acknowledged.
  Status acceptShrinkNote(UniqueFd fd, const Hello& h);
  void breakComm(const Status& s) override;
  // abort() and revoke(): the communicator broken with `why`, every connection failed, every
  // waiter woken.
  void stop(const Status& why);
  void forEachPort(const std::function<void(channel::PortBase&)>& fn);
  void flushSends();
  // Sum of every connection's step counters: changes whenever any step moves.
  uint64_t progressMark();
  // Connections made during init wait up to RECCL_BOOTSTRAP_TIMEOUT_MS; later (lazy) ones are
  // part of a collective and wait up to RECCL_TIMEOUT_MS, or until the communicator fails (an
  // abort, a revoke, a fault elsewhere), whose error the call then returns.
  Deadline connectDeadline() const {
    if (initialized_) return Deadline::afterMs(opts_.timeoutMs).cancellable(&broken_);
    return Deadline::afterMs(opts_.bootstrapTimeoutMs).cancellable(opts_.cancelInit.get());
  }
  std::atomic<bool> initialized_{false};

  CommOptions opts_;
  int rank_ = 0;
  int nranks_ = 0;
  Key key_{};           // the communicator's key (from the root): every connection proves it
  uint64_t commId_ = 0;
  std::shared_ptr<BootstrapRoot> root_;
  std::vector<RankInfo> table_;
  Topology topo_;
  std::vector<NicInfo> myNics_;
  uint64_t collSeq_ = 0;

  channel::PortEnv env_;
  std::unique_ptr<transport::SocketEngine> engine_;
  std::unique_ptr<transport::SocketPathFactory> paths_;  // TCP paths for failover (after the bootstrap)
  // RECCL_TRANSPORT chose verbs (core/comm_transport.h): every connection between hosts, and
  // failover's paths; paths_ is then its side channel.
  std::unique_ptr<transport::PathFactory> verbs_;
  // The passive end of a verbs connection's first records, on the listener thread.
  Status acceptVerbs(Incoming& in, const Hello& h, Deadline d);
  // Monitor thread + migration (ccl/failover/). Stopped first in ~Comm, freed after the ports.
  std::unique_ptr<FailoverPart> failover_;

  std::mutex sendMu_;
  std::map<PortKey, std::unique_ptr<channel::SendPort>> sends_;
  std::map<PortKey, int> sendRail_;  // TCP ports: the rail of the first path (shared memory: absent)
  std::mutex recvMu_;
  std::map<PortKey, std::unique_ptr<channel::RecvPort>> recvs_;
  std::map<PortKey, int> recvRail_;

  // Data listener: accepts connections, checks their hello, parks them for recvPort().
  UniqueFd listen_;
  transport::Endpoint dataEp_;
  UniqueFd stopEvent_;
  std::thread listener_;
  std::mutex inMu_;
  std::condition_variable inCv_;
  std::map<PortKey, Incoming> incoming_;
  // Shrink notes the listener took and the shrinks counted per excluded list (guarded by
  // shrinkMu_). A note holds the child's boot key: wiped when dropped.
  struct HeldShrinkNote {
    int from = 0;
    uint32_t serial = 0;
    ShrinkNote note;
  };
  std::mutex shrinkMu_;
  std::condition_variable shrinkCv_;
  std::vector<HeldShrinkNote> shrinkNotes_;
  std::map<std::array<std::byte, kShrinkDigestBytes>, uint32_t> shrinkSerials_;
  // The (list, serial) of each ShrinkClaim alive.
  std::multiset<std::pair<std::array<std::byte, kShrinkDigestBytes>, uint32_t>> shrinkClaims_;
  void dropShrinkNotes();  // in ~Comm
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> portsMade_{0};
  std::atomic<uint64_t> shmSerial_{0};
  // The sockets of lazy connects under way (sendPort holds sendMu_ through their hello): breakComm
  // (recclCommAbort's too) shuts them down, so such a connect ends now rather than at its deadline
  // and abort is not held up by sendMu_. Taken last: sendMu_ -> dialMu_.
  std::mutex dialMu_;
  std::vector<int> dialing_;

  // Channel workers.
  std::vector<std::thread> workers_;
  std::mutex workMu_;
  std::condition_variable workCv_;
  std::condition_variable doneCv_;
  std::deque<std::function<void()>> work_;
  bool stopWorkers_ = false;

  // Calls in flight and the latched fatal error.
  std::atomic<int> active_{0};
  std::mutex activeMu_;
  std::condition_variable activeCv_;
  mutable std::mutex errMu_;
  Status fatal_;
  std::atomic<bool> broken_{false};
  // A failure whose breakComm did not get the map yet: the next holder of the map closes its
  // ports (closePortsLeftOpen, under that map's lock).
  std::atomic<bool> sendsLeftOpen_{false};
  std::atomic<bool> recvsLeftOpen_{false};
  template <typename PortMap>
  static void closePortsLeftOpen(std::atomic<bool>& leftOpen, PortMap& ports, const Status& why) {
    if (!leftOpen.exchange(false)) return;
    for (auto& [k, p] : ports) {
      p->fail(why);
      if (p->path()) p->path()->shutdown();
    }
  }
  // Declared after a lazy connect's lock of its map (sendPort, recvPort): a failure of the
  // communicator while it held the map closes the map's ports before the map goes back.
  template <typename PortMap>
  struct CloseIfBroken {
    Comm* c;
    std::atomic<bool>& leftOpen;
    PortMap& ports;
    ~CloseIfBroken() {
      if (c->broken_.load()) closePortsLeftOpen(leftOpen, ports, c->asyncError());
    }
  };
  std::atomic<uint64_t> collectives_{0};
};

}  // namespace reccl::core
