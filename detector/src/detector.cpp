// Detector (detector.h): its sources, watches, signal handling and status; the loop that drives
// it is detector_loop.cpp.
#include "reccl/detector/detector.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "detector_private.h"
#include "reccl/common/deadline.h"
#include "reccl/common/log.h"
#include "reccl/detector/rdma_async_source.h"
#include "reccl/detector/rdma_loss.h"

namespace reccl::detector {

namespace {
uint64_t healthBits(bool admin, bool carrier) {
  return (admin ? RECCL_LINK_STATE_ADMIN_UP : 0) | (carrier ? RECCL_LINK_STATE_CARRIER : 0);
}

// Sets the slot's health bits to `health`; bumps the epoch when they changed. Returns the old
// state, or nothing when unchanged. Lock-free against the BPF programs writing the same slot.
std::optional<uint64_t> casHealth(reccl_link_slot& sl, uint64_t health, uint64_t tsNs) {
  uint64_t old = __atomic_load_n(&sl.state, __ATOMIC_ACQUIRE);
  for (;;) {
    if ((old & RECCL_LINK_STATE_HEALTHY) == health) return std::nullopt;
    uint64_t next = (old & ~uint64_t(RECCL_LINK_STATE_HEALTHY)) | health;
    if (__atomic_compare_exchange_n(&sl.state, &old, next, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      break;
  }
  __atomic_fetch_add(&sl.epoch, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&sl.last_change_ns, tsNs, __ATOMIC_RELAXED);
  return old;
}
}  // namespace

Result<std::unique_ptr<Detector>> Detector::create(DetectorOptions opts) {
  RECCL_TRY(opts.validate());
  std::unique_ptr<Detector> d(new Detector());
  d->opts_ = opts;
  d->sm_ = LinkStateMachine(opts.stateMachine);
  d->slotUsed_.assign(RECCL_LINK_MAX_SLOTS, false);
  RECCL_ASSIGN_OR_RETURN(d->ownNetnsIno_, ownNetnsIno());
  d->eventFd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  d->wakeFd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  d->timerFd_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  d->epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!d->eventFd_ || !d->wakeFd_ || !d->timerFd_ || !d->epoll_)
    return Status::FromErrno(errno, "detector: create eventfd/timerfd/epoll");
  RECCL_TRY(d->epollAdd(d->wakeFd_.get(), tag(kTagWake)));
  RECCL_TRY(d->epollAdd(d->timerFd_.get(), tag(kTagTimer)));
  RECCL_TRY(d->openSources());
  for (const auto& w : opts.watch) {
    auto r = d->addWatch(w);
    if (!r.ok()) return r.status();
  }
  return d;
}

Status Detector::epollAdd(int fd, uint64_t t) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = t;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
    return Status::FromErrno(errno, "detector: epoll_ctl add");
  return Status::Ok();
}

Status Detector::openSources() {
  if (opts_.mode != SourceMode::kNetlink) {
    auto b = BpfSource::open(opts_.bpf, [this](const reccl_link_event& e) { onBpfRecord(e); });
    if (b.ok()) {
      bpf_ = std::move(b).value();
      for (const auto& h : bpf_->hooks())
        sourceInfo_.push_back({h.program + "(" + sourceName(h.source) + ")", h.active, h.reason});
      RECCL_TRY(epollAdd(bpf_->epollFd(), tag(kTagBpf)));
    } else if (opts_.mode == SourceMode::kBpf) {
      return b.status();
    } else {
      RECCL_WARN(kLogDetector, "detector: bpf unavailable, falling back to rtnetlink: %s",
                 b.status().message().c_str());
      sourceInfo_.push_back({"bpf", false, b.status().message()});
    }
  } else {
    sourceInfo_.push_back({"bpf", false, "disabled: netlink mode"});
  }
  sourceInfo_.push_back({"rtnetlink", opts_.rtnetlink, opts_.rtnetlink ? "" : "disabled"});
  if (opts_.rdma) {
    auto r = RdmaAsyncSource::open(ownNetnsIno_);
    if (r.ok()) {
      rdma_ = std::move(r).value();
      for (int fd : rdma_->fds()) RECCL_TRY(epollAdd(fd, tag(kTagRdma, static_cast<uint32_t>(fd))));
      sourceInfo_.push_back({"rdma_async", true, ""});
    } else {
      sourceInfo_.push_back({"rdma_async", false, r.status().message()});
    }
  } else {
    sourceInfo_.push_back({"rdma_async", false, "disabled"});
  }
  if (opts_.rdmaLoss.windowNs != 0) {
    auto r = RdmaLossSource::open(opts_.rdmaSysfs, ownNetnsIno_, opts_.rdmaLoss);
    if (r.ok()) {
      rdmaLoss_ = std::move(r).value();
      RECCL_TRY(epollAdd(rdmaLoss_->fd(), tag(kTagRdmaLoss)));
      sourceInfo_.push_back({"rdma_counters", true, ""});  // its reason: the ports, in status()
    } else {
      sourceInfo_.push_back({"rdma_counters", false, r.status().message()});
    }
  } else {
    sourceInfo_.push_back({"rdma_counters", false, "disabled"});
  }
  if (bpf_) {
    slots_ = bpf_->slots();
  } else {
    // A memfd, so the daemon can hand it out read-only like the BPF map.
    size_t bytes = sizeof(reccl_link_slot) * RECCL_LINK_MAX_SLOTS;
    slotsMemfd_.reset(memfd_create("reccl-link-state", MFD_CLOEXEC));
    if (!slotsMemfd_ || ftruncate(slotsMemfd_.get(), static_cast<off_t>(bytes)) != 0)
      return Status::FromErrno(errno, "detector: memfd for link-state array");
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, slotsMemfd_.get(), 0);
    if (m == MAP_FAILED) return Status::FromErrno(errno, "detector: mmap link-state array");
    slots_ = static_cast<reccl_link_slot*>(m);
    ownSlots_ = true;
  }
  std::string active;
  for (const auto& s : sourceInfo_)
    if (s.active) active += (active.empty() ? "" : ",") + s.name;
  RECCL_INFO(kLogDetector, "detector: mode %s, active sources %s", sourceModeName(opts_.mode),
             active.c_str());
  return Status::Ok();
}

Detector::~Detector() {
  stop();
  {
    std::lock_guard lk(mu_);
    watches_.clear();
    netns_.clear();
  }
  bpf_.reset();
  rdma_.reset();
  rdmaLoss_.reset();
  if (ownSlots_ && slots_) munmap(slots_, sizeof(reccl_link_slot) * RECCL_LINK_MAX_SLOTS);
}

void Detector::subscribe(Callback cb) {
  std::lock_guard lk(mu_);
  callbacks_.push_back(std::move(cb));
}

void Detector::setSignalObserver(SignalObserver obs) {
  std::lock_guard lk(mu_);
  observer_ = std::move(obs);
}

Result<Detector::NetnsCtx*> Detector::netnsFor(Netns ns, const std::string& spec) {
  for (auto& c : netns_)
    if (c && c->ns.ino == ns.ino) return c.get();
  auto ctx = std::make_unique<NetnsCtx>();
  size_t index = 0;
  while (index < netns_.size() && netns_[index]) ++index;
  ctx->index = static_cast<uint32_t>(index);
  int fd = ns.fd.valid() ? ns.fd.get() : -1;
  auto q = RtnlLinkQuery::open(fd);
  if (!q.ok()) {
    if (q.status().code() == Errc::kPermission)
      return Status(Errc::kPermission, "netns: entering '" + spec + "' needs CAP_SYS_ADMIN");
    return q.status();
  }
  ctx->query = std::make_unique<RtnlLinkQuery>(std::move(q).value());
  if (opts_.rtnetlink) {
    RECCL_ASSIGN_OR_RETURN(ctx->rtnl, RtnetlinkSource::open(fd, ns.ino));
    RECCL_TRY(epollAdd(ctx->rtnl->fd(), tag(kTagRtnl, ctx->index)));
  }
  ctx->ns = std::move(ns);
  if (index == netns_.size()) netns_.emplace_back();
  netns_[index] = std::move(ctx);
  return netns_[index].get();
}

void Detector::releaseNetnsIfUnused(NetnsCtx* ctx) {
  for (const auto& [k, w] : watches_)
    if (w->ctx == ctx) return;
  if (ctx->rtnl) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, ctx->rtnl->fd(), nullptr);
  netns_[ctx->index].reset();
}

Result<WatchedLink> Detector::addWatch(const WatchSpec& spec) {
  RECCL_ASSIGN_OR_RETURN(Netns ns, openNetns(spec.netns));
  return addWatch(spec, std::move(ns));
}

Result<WatchedLink> Detector::addWatch(const WatchSpec& spec, Netns ns) {
  std::lock_guard lk(mu_);
  RECCL_ASSIGN_OR_RETURN(NetnsCtx * ctx, netnsFor(std::move(ns), spec.netns));
  auto r = addWatchIn(ctx, spec);
  if (!r.ok()) releaseNetnsIfUnused(ctx);
  return r;
}

Result<WatchedLink> Detector::addWatchIn(NetnsCtx* ctx, const WatchSpec& spec) {
  auto info = ctx->query->byName(spec.ifname);
  if (!info.ok()) {
    if (info.status().code() == Errc::kNotFound)
      return Status(Errc::kNotFound, "dev: no interface '" + spec.ifname + "' in netns '" +
                                         (spec.netns.empty() ? "(own)" : spec.netns) + "'");
    return info.status();
  }
  LinkKey key{ctx->ns.ino, info->ifindex};
  if (auto it = watches_.find(key); it != watches_.end()) return it->second->info;
  uint32_t slot = RECCL_LINK_NO_SLOT;
  for (uint32_t i = 0; i < slotUsed_.size(); ++i)
    if (!slotUsed_[i]) {
      slot = i;
      break;
    }
  if (slot == RECCL_LINK_NO_SLOT)
    return Status(Errc::kInvalidArgument, "watch: more than " +
                                              std::to_string(RECCL_LINK_MAX_SLOTS) + " links");
  auto w = std::make_unique<Watch>();
  w->info = {key, spec.netns, info->ifname, slot};
  w->ctx = ctx;
  w->slotSeq = info->carrierSeq();
  reccl_link_slot& sl = slots_[slot];
  bool healthy = info->adminUp && info->carrier;
  __atomic_store_n(&sl.state, RECCL_LINK_STATE_VALID | healthBits(info->adminUp, info->carrier),
                   __ATOMIC_RELEASE);
  sl.ifindex = key.ifindex;
  sl.netns_ino = key.netnsIno;
  sl.retrans_window = 0;
  sl.retrans_window_start_ns = 0;
  sl.last_degraded_ns = 0;
  sl.last_change_ns = monotonicNs();
  __atomic_fetch_add(&sl.epoch, 1, __ATOMIC_RELEASE);
  if (bpf_) {
    RECCL_TRY(bpf_->watch(key, slot));
    bpf_->setLinkwatchUrgent(slot, info->linkwatchUrgent());
    bpf_->setWatchCount(static_cast<uint32_t>(watches_.size() + 1));
    uint32_t count = 0;
    for (uint32_t i = 0; i < slotUsed_.size(); ++i)
      if (slotUsed_[i] || i == slot) count = i + 1;
    bpf_->setSlotCount(count);
    if (bpf_->canResolve()) {
      auto r = bpf_->resolveDevices(ctx->ns.fd.valid() ? ctx->ns.fd.get() : -1, ctx->ns.ino);
      if (!r.ok())
        RECCL_WARN(kLogDetector, "detector: %s (link-watch falls back to userspace reads)",
                   r.status().message().c_str());
    }
  }
  if (ctx->rtnl) ctx->rtnl->watch(info.value());
  sm_.addLink(key, info->ifname, healthy, monotonicNs());
  slotUsed_[slot] = true;
  WatchedLink out = w->info;
  watches_[key] = std::move(w);
  tellRdmaLossWatched();
  RECCL_INFO(kLogDetector, "detector: watching %s:%s (netns %u ifindex %u slot %u, %s)",
             spec.netns.empty() ? "(own)" : spec.netns.c_str(), out.ifname.c_str(), key.netnsIno,
             key.ifindex, slot, healthy ? "up" : "down");
  return out;
}

Status Detector::removeWatch(LinkKey key) {
  std::lock_guard lk(mu_);
  auto it = watches_.find(key);
  if (it == watches_.end()) return Status(Errc::kNotFound, "watch: link not watched");
  Watch& w = *it->second;
  if (bpf_) {
    RECCL_TRY(bpf_->unwatch(key));
    bpf_->forgetDevice(w.info.slot);
    bpf_->setWatchCount(static_cast<uint32_t>(watches_.size() - 1));
  }
  if (w.ctx->rtnl) w.ctx->rtnl->unwatch(key.ifindex);
  __atomic_store_n(&slots_[w.info.slot].state, 0, __ATOMIC_RELEASE);
  __atomic_fetch_add(&slots_[w.info.slot].epoch, 1, __ATOMIC_RELEASE);
  slotUsed_[w.info.slot] = false;
  sm_.removeLink(key);
  NetnsCtx* ctx = w.ctx;
  watches_.erase(it);
  tellRdmaLossWatched();
  releaseNetnsIfUnused(ctx);
  return Status::Ok();
}

void Detector::tellRdmaLossWatched() {
  if (!rdmaLoss_) return;
  std::set<LinkKey> own;
  for (const auto& [key, w] : watches_)
    if (key.netnsIno == ownNetnsIno_) own.insert(key);
  rdmaLoss_->setWatched(std::move(own));
}

std::vector<WatchedLink> Detector::watched() const {
  std::lock_guard lk(mu_);
  std::vector<WatchedLink> v;
  for (const auto& [k, w] : watches_) v.push_back(w->info);
  return v;
}

void Detector::onBpfRecord(const reccl_link_event& e) {
  uint64_t now = monotonicNs();
  if (e.kind == RECCL_LINK_KIND_LINKWATCH_SCHEDULED) {
    counters_.linkwatchWakeups++;
    pairLinkwatch(e.ts_ns);
    return;
  }
  LinkSignal s;
  s.kind = static_cast<LinkKind>(e.kind);
  s.source = static_cast<LinkSource>(e.source);
  s.tsNs = e.ts_ns;
  s.link = {e.netns_ino, e.ifindex};
  s.ifname.assign(e.ifname, strnlen(e.ifname, sizeof(e.ifname)));
  s.value = e.value;
  Direction dir = directionOf(s.kind);
  if (dir == Direction::kDown || dir == Direction::kUp) {
    s.carrierSeq = carrierSeqFromCounts(e.value);
    s.carrierDowns = static_cast<uint32_t>(e.value >> 32);
    if (auto it = watches_.find(s.link); it != watches_.end() && *s.carrierSeq > it->second->slotSeq)
      it->second->slotSeq = *s.carrierSeq;
  }
  feed(s, now);
}

// The link-watch hook says "some device changed carrier": read every watched device now. The
// device's state is already final when the kernel queues the work, so this read is as early as
// the hook itself, plus one netlink round trip per watched device.
void Detector::pairLinkwatch(uint64_t tsNs) {
  for (auto& [key, w] : watches_) {
    auto info = w->ctx->query->byIndex(key.ifindex);
    if (!info.ok()) continue;
    uint64_t seq = info->carrierSeq();
    if (seq < w->slotSeq) continue;
    reccl_link_slot& sl = slots_[w->info.slot];
    bool healthy = info->adminUp && info->carrier;
    auto old = casHealth(sl, healthBits(info->adminUp, info->carrier), tsNs);
    LinkKind kind = RECCL_LINK_KIND_NONE;
    if (old)
      kind = classifyTransition(*old & RECCL_LINK_STATE_ADMIN_UP, *old & RECCL_LINK_STATE_CARRIER,
                                info->adminUp, info->carrier);
    // Unchanged usability but new transitions: flaps the slot never showed; re-report the
    // current state so damping counts them.
    if (kind == RECCL_LINK_KIND_NONE && seq > w->slotSeq)
      kind = healthy ? RECCL_LINK_KIND_CARRIER_UP : RECCL_LINK_KIND_CARRIER_DOWN;
    w->slotSeq = seq;
    if (kind == RECCL_LINK_KIND_NONE) continue;
    LinkSignal s;
    s.kind = kind;
    s.source = RECCL_LINK_SRC_RAWTP_LINKWATCH;
    s.tsNs = tsNs;
    s.link = key;
    s.ifname = info->ifname;
    s.carrierSeq = seq;
    s.carrierDowns = info->carrierDownCount;
    s.value = (uint64_t(info->carrierDownCount) << 32) | info->carrierUpCount;
    feed(s, monotonicNs());
  }
}

// A watched device whose link-watch class changed (its veth peer moved and took another
// ifindex): the scan's end follows it (mu_ held).
void Detector::applyUrgencyChanges(NetnsCtx& ctx) {
  if (!ctx.rtnl) return;
  for (const auto& u : ctx.rtnl->takeUrgencyChanges()) {
    auto it = watches_.find(LinkKey{ctx.ns.ino, u.ifindex});
    if (it == watches_.end() || !bpf_) continue;
    bpf_->setLinkwatchUrgent(it->second->info.slot, u.urgent);
    RECCL_INFO(kLogDetector, "detector: %s is now link-watch %s (its iflink changed)", it->second->info.ifname.c_str(),
               u.urgent ? "urgent" : "non-urgent");
  }
}

void Detector::updateSlot(Watch& w, const LinkSignal& s) {
  if (s.source == RECCL_LINK_SRC_RDMA_COUNTERS && s.kind == RECCL_LINK_KIND_DEGRADED) {
    setSlotDegraded(slots_[w.info.slot], true);  // as the retransmit program does for TCP
    return;
  }
  if (s.source != RECCL_LINK_SRC_RTNETLINK && s.source != RECCL_LINK_SRC_RDMA_ASYNC &&
      s.source != RECCL_LINK_SRC_INBAND)
    return;  // BPF programs and the link-watch pairing maintain the slot themselves
  if (s.carrierSeq) {
    if (*s.carrierSeq < w.slotSeq) return;  // reports an older state than the slot holds
    w.slotSeq = *s.carrierSeq;
  }
  reccl_link_slot& sl = slots_[w.info.slot];
  uint64_t cur = __atomic_load_n(&sl.state, __ATOMIC_ACQUIRE);
  uint64_t health = cur & RECCL_LINK_STATE_HEALTHY;
  switch (s.kind) {
    case RECCL_LINK_KIND_CARRIER_UP:
    case RECCL_LINK_KIND_ADMIN_UP:
    case RECCL_LINK_KIND_RDMA_PORT_ACTIVE: health = RECCL_LINK_STATE_HEALTHY; break;
    case RECCL_LINK_KIND_CARRIER_DOWN:
    case RECCL_LINK_KIND_RDMA_PORT_ERR:
    case RECCL_LINK_KIND_RDMA_DEVICE_FATAL: health &= ~uint64_t(RECCL_LINK_STATE_CARRIER); break;
    case RECCL_LINK_KIND_ADMIN_DOWN: health &= ~uint64_t(RECCL_LINK_STATE_ADMIN_UP); break;
    default: return;
  }
  casHealth(sl, health, s.tsNs);
}

void Detector::feed(const LinkSignal& s, uint64_t nowNs) {
  if (s.source > 0 && s.source < RECCL_LINK_SRC_COUNT) counters_.signals[s.source]++;
  if (observer_) observer_(s, nowNs);
  auto it = watches_.find(s.link);
  if (it == watches_.end()) return;  // not ours (a stale record after removeWatch)
  updateSlot(*it->second, s);
  const bool wasUp = sm_.physicallyUp(s.link);
  sm_.onSignal(s, nowNs, pending_);
  // Physically back (its hold-down only starts now): what it sends from here must not wait for
  // neighbour entries the outage left unresolved.
  if (!wasUp && sm_.physicallyUp(s.link)) probeUnresolvedNeighbours(*it->second);
}

void Detector::probeUnresolvedNeighbours(Watch& w) {
  NetnsCtx& ctx = *w.ctx;
  if (ctx.neighboursRefused) return;
  if (!ctx.neighbours) {
    auto t = NeighbourTable::open(ctx.ns.fd.get());
    if (!t.ok()) {
      refuseNeighbours(ctx, w, t.status());
      return;
    }
    ctx.neighbours = std::make_unique<NeighbourTable>(std::move(t).value());
  }
  auto n = ctx.neighbours->probeUnresolved(w.info.key.ifindex, w.info.ifname);
  if (!n.ok()) {
    refuseNeighbours(ctx, w, n.status());
    return;
  }
  counters_.neighboursProbed += static_cast<uint64_t>(*n);
  if (*n > 0)
    RECCL_INFO(kLogDetector, "detector: %s back: asked again for %d neighbour%s its outage left unresolved",
               w.info.ifname.c_str(), *n, *n == 1 ? "" : "s");
}

void Detector::refuseNeighbours(NetnsCtx& ctx, const Watch& w, const Status& why) {
  // Without the capability it never works there: said once. Anything else starts afresh at the
  // next return (the sockets may hold what a failed exchange left).
  ctx.neighbours.reset();
  if (why.code() == Errc::kPermission) {
    ctx.neighboursRefused = true;
    RECCL_INFO(kLogDetector, "detector: %s: cannot ask for the neighbours an outage left unresolved (%s): after a "
               "link's return, packets to them wait for the kernel's next ARP try (up to 1 s)",
               w.info.ifname.c_str(), why.ToString().c_str());
    return;
  }
  RECCL_WARN(kLogDetector, "detector: %s back: %s", w.info.ifname.c_str(), why.ToString().c_str());
}

uint64_t Detector::linkEpoch(uint32_t slot) const {
  if (slot >= RECCL_LINK_MAX_SLOTS || !slots_) return 0;
  return __atomic_load_n(&slots_[slot].epoch, __ATOMIC_ACQUIRE);
}

int Detector::linkStateMapFd() const { return bpf_ ? bpf_->linkStateMapFd() : -1; }

Result<UniqueFd> Detector::linkStateShareFd() const {
  if (bpf_) {
    RECCL_ASSIGN_OR_RETURN(int fd, bpf_->linkStateShareFd());
    return UniqueFd(fd);
  }
  std::string path = "/proc/self/fd/" + std::to_string(slotsMemfd_.get());
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "detector: reopen link-state memfd read-only");
  return UniqueFd(fd);
}

std::set<LinkSource> Detector::activeSources() const {
  std::set<LinkSource> s;
  if (bpf_) s = bpf_->activeSources();
  if (opts_.rtnetlink) s.insert(RECCL_LINK_SRC_RTNETLINK);
  if (rdma_) s.insert(RECCL_LINK_SRC_RDMA_ASYNC);
  if (rdmaLoss_) s.insert(RECCL_LINK_SRC_RDMA_COUNTERS);
  return s;
}

DetectorStatus Detector::status() const {
  std::lock_guard lk(mu_);
  DetectorStatus st;
  st.mode = sourceModeName(opts_.mode);
  st.sources = sourceInfo_;
  if (rdmaLoss_)
    for (auto& src : st.sources)
      if (src.name == "rdma_counters") {
        src.reason.clear();
        for (const auto& p : rdmaLoss_->ports()) src.reason += (src.reason.empty() ? "" : ", ") + p;
        if (src.reason.empty()) src.reason = "no port bound to a netdev counts sequence errors yet";
      }
  if (rdmaLoss_) st.rdmaPorts = rdmaLoss_->reports();
  uint64_t now = monotonicNs();
  for (const auto& [key, w] : watches_) {
    LinkReport r;
    r.watch = w->info;
    if (auto s = sm_.status(key, now)) r.status = *s;
    r.epoch = __atomic_load_n(&slots_[w->info.slot].epoch, __ATOMIC_ACQUIRE);
    r.kernelState = __atomic_load_n(&slots_[w->info.slot].state, __ATOMIC_ACQUIRE);
    if (bpf_) {
      r.retrans = bpf_->retransWindow(w->info.slot);
      r.linkwatchUrgent = bpf_->linkwatchUrgent(w->info.slot);
    }
    st.links.push_back(std::move(r));
  }
  st.counters = counters_;
  if (bpf_) st.counters.bpf = bpf_->counters();
  st.counters.stateMachine = sm_.counters();
  for (const auto& c : netns_)
    if (c && c->rtnl) st.counters.rtnlOverruns += c->rtnl->overruns();
  return st;
}

}  // namespace reccl::detector
