// The detector as a library: sources (BPF hooks, rtnetlink, RDMA async events) feed one link
// state machine, on a background thread or on the caller's; subscribers get LinkDown/LinkUp/
// LinkDegraded through an eventfd + drain() (for an epoll loop) or a callback, and read per-link
// epochs from the link-state array with one load.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "reccl/detector/bpf_source.h"
#include "reccl/detector/detector_options.h"
#include "reccl/detector/link_state_machine.h"
#include "reccl/detector/netns.h"
#include "reccl/detector/rdma_loss.h"

struct epoll_event;

namespace reccl::detector {

class RtnetlinkSource;
class RdmaAsyncSource;
class RdmaLossSource;
class RtnlLinkQuery;

struct SourceInfo {
  std::string name;  // "tp_qdisc_reset", "rtnetlink", ...
  bool active = false;
  std::string reason;
};

struct WatchedLink {
  LinkKey key;
  std::string netns;
  std::string ifname;
  uint32_t slot = RECCL_LINK_NO_SLOT;
};

struct LinkReport {
  WatchedLink watch;
  LinkStatus status;
  uint64_t epoch = 0;
  uint64_t kernelState = 0;  // RECCL_LINK_STATE_* in the slot
  RetransWindowStats retrans;  // with BPF only
  // With BPF only: link-watch handles the device's carrier changes as urgent (the in-kernel scan
  // then ends with link-watch's run). Read from IFLA_LINK at watch time and on every RTM_NEWLINK.
  bool linkwatchUrgent = false;
};

struct DetectorCounters {
  uint64_t signals[RECCL_LINK_SRC_COUNT] = {};  // signals fed to the state machine, by source
  uint64_t events = 0;             // LinkEvents delivered
  uint64_t queueOverflows = 0;     // LinkEvents dropped because no one drained
  uint64_t linkwatchWakeups = 0;   // link-watch records paired with a state read
  uint64_t rtnlOverruns = 0;
  // ARP requests for IPv4 neighbours an outage left unresolved, sent when their link came back
  // (neighbours.h), so that what waits for them goes at once.
  uint64_t neighboursProbed = 0;
  BpfCounters bpf;
  StateMachineCounters stateMachine;
};

struct DetectorStatus {
  std::string mode;
  std::vector<SourceInfo> sources;
  std::vector<LinkReport> links;
  DetectorCounters counters;
  std::vector<RdmaPortReport> rdmaPorts;  // the watched links' RDMA ports, as last read
};

class Detector {
 public:
  using Callback = std::function<void(const LinkEvent&)>;
  // Sees every signal a source produced, before the state machine (metrics, benchmarks).
  using SignalObserver = std::function<void(const LinkSignal&, uint64_t recvNs)>;

  // Opens the sources (BPF probing included) and watches opts.watch. Nothing runs until start().
  static Result<std::unique_ptr<Detector>> create(DetectorOptions opts);
  ~Detector();
  Detector(const Detector&) = delete;
  Detector& operator=(const Detector&) = delete;

  // Callbacks run on the thread that drives the detector; set them before start() or
  // startOnCaller().
  void subscribe(Callback cb);
  void setSignalObserver(SignalObserver obs);
  // The detector's own thread waits on its sources and timers.
  Status start();
  // Instead of start(): the caller's thread drives the detector. It polls pollFd() (readable
  // while a source or a timer has work) and calls dispatch(), which handles that work without
  // blocking; events then wait for drain() as with start(). A fault's ring-buffer record then
  // wakes the caller's thread itself, one thread hand-off fewer (the library's monitor).
  Status startOnCaller();
  int pollFd() const { return epoll_.get(); }
  void dispatch();
  void stop();

  Result<WatchedLink> addWatch(const WatchSpec& spec);
  // The same with the namespace already open (the daemon's clients hand theirs over as
  // descriptors); spec.netns is then only its display name.
  Result<WatchedLink> addWatch(const WatchSpec& spec, Netns ns);
  Status removeWatch(LinkKey key);
  std::vector<WatchedLink> watched() const;

  // Readable (eventfd) while LinkEvents wait in the queue.
  int eventFd() const { return eventFd_.get(); }
  std::vector<LinkEvent> drain();
  // Waits up to timeoutMs for at least one event, then drains.
  std::vector<LinkEvent> waitEvents(int timeoutMs);

  // The link-state array: BPF-mapped when BPF runs, else a private array the detector
  // maintains the same way. slot < RECCL_LINK_MAX_SLOTS.
  uint64_t linkEpoch(uint32_t slot) const;
  const reccl_link_slot* slots() const { return slots_; }
  int linkStateMapFd() const;  // -1 without BPF
  // An fd of the link-state array for another process to mmap PROT_READ: a duplicate of the
  // BPF map fd (the kernel cannot mmap a read-only map fd), or without BPF a read-only reopen
  // of the memfd the detector keeps the array in. Caller owns it.
  Result<UniqueFd> linkStateShareFd() const;
  bool bpfActive() const { return bpf_ != nullptr; }

  DetectorStatus status() const;
  std::set<LinkSource> activeSources() const;

 private:
  struct NetnsCtx;
  struct Watch;
  Detector() = default;
  Status openSources();
  Result<NetnsCtx*> netnsFor(Netns ns, const std::string& spec);
  // A namespace no watch uses any more is closed (its nsfs fd and rtnetlink socket), so a
  // daemon serving jobs in throw-away namespaces neither leaks them nor keeps them alive.
  void releaseNetnsIfUnused(NetnsCtx* ctx);
  Result<WatchedLink> addWatchIn(NetnsCtx* ctx, const WatchSpec& spec);  // mu_ held
  void run();
  void handle(const epoll_event* evs, int n);  // one batch of ready sources, mu_ taken inside
  void onBpfRecord(const reccl_link_event& e);
  void pairLinkwatch(uint64_t tsNs);
  void feed(const LinkSignal& s, uint64_t nowNs);
  void probeUnresolvedNeighbours(Watch& w);
  void refuseNeighbours(NetnsCtx& ctx, const Watch& w, const Status& why);
  void updateSlot(Watch& w, const LinkSignal& s);
  void applyUrgencyChanges(NetnsCtx& ctx);
  void deliver();
  void rearmTimer();
  void tellRdmaLossWatched();  // mu_ held: the watches in this namespace, whose ports it reads
  Status epollAdd(int fd, uint64_t tag);

  DetectorOptions opts_;
  std::unique_ptr<BpfSource> bpf_;
  std::unique_ptr<RdmaAsyncSource> rdma_;
  std::unique_ptr<RdmaLossSource> rdmaLoss_;
  std::vector<SourceInfo> sourceInfo_;
  reccl_link_slot* slots_ = nullptr;
  bool ownSlots_ = false;
  UniqueFd slotsMemfd_;
  uint32_t ownNetnsIno_ = 0;

  mutable std::mutex mu_;  // guards everything below; the driving thread holds it per batch
  std::vector<std::unique_ptr<NetnsCtx>> netns_;  // null: a released entry (its index is reused)
  std::map<LinkKey, std::unique_ptr<Watch>> watches_;
  std::vector<bool> slotUsed_;
  LinkStateMachine sm_{StateMachineParams{}};
  std::vector<LinkEvent> pending_;  // produced in the current batch, not yet delivered
  std::deque<LinkEvent> queue_;
  DetectorCounters counters_;
  std::vector<Callback> callbacks_;
  SignalObserver observer_;

  UniqueFd epoll_;
  UniqueFd eventFd_;
  UniqueFd wakeFd_;
  UniqueFd timerFd_;
  std::thread thread_;
  std::atomic<bool> running_{false};
};

}  // namespace reccl::detector
