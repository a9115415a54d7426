#include "reccl/detector/bpf_source.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <sched.h>
#include <thread>

#include "link_detector.skel.h"
#include "reccl/common/log.h"

namespace reccl::detector {

uint64_t kallsymsAddress(const char* name) {
  FILE* f = std::fopen("/proc/kallsyms", "re");
  if (!f) return 0;
  char line[512];
  uint64_t addr = 0;
  const size_t len = std::strlen(name);
  while (std::fgets(line, sizeof(line), f)) {
    // "ffffffff81edaff0 t linkwatch_event" (optionally followed by "\t[module]")
    char* sym = std::strchr(line, ' ');
    if (!sym || !(sym = std::strchr(sym + 1, ' '))) continue;
    ++sym;
    if (std::strncmp(sym, name, len) != 0) continue;
    if (sym[len] != '\n' && sym[len] != '\t' && sym[len] != '\0') continue;
    addr = std::strtoull(line, nullptr, 16);
    break;
  }
  std::fclose(f);
  return addr;
}

namespace {

struct Hook {
  const char* program;
  LinkSource source;
  const char* fallbackOf;  // try only when this program failed
};

// Probing order: the earliest signal first; a fallback is tried only when its primary fails.
constexpr Hook kHooks[] = {
    {"fexit_carrier_off", RECCL_LINK_SRC_FENTRY_CARRIER, nullptr},
    {"fexit_carrier_on", RECCL_LINK_SRC_FENTRY_CARRIER, nullptr},
    {"linkwatch_queue", RECCL_LINK_SRC_RAWTP_LINKWATCH, nullptr},
    {"rawtp_linkwatch_queue", RECCL_LINK_SRC_RAWTP_LINKWATCH, "linkwatch_queue"},
    {"rawtp_linkwatch_timer", RECCL_LINK_SRC_RAWTP_LINKWATCH, "linkwatch_queue"},
    {"tp_qdisc_reset", RECCL_LINK_SRC_TP_QDISC_RESET, nullptr},
    {"rawtp_qdisc_reset", RECCL_LINK_SRC_TP_QDISC_RESET, "tp_qdisc_reset"},
    {"tp_xmit_timeout", RECCL_LINK_SRC_TP_XMIT_TIMEOUT, nullptr},
    {"tp_dql_stall", RECCL_LINK_SRC_TP_DQL_STALL, nullptr},
    {"tp_tcp_retransmit", RECCL_LINK_SRC_TP_TCP_RETRANSMIT, nullptr},
    {"fentry_ib_dispatch", RECCL_LINK_SRC_FENTRY_IB_DISPATCH, nullptr},
};

struct KernelSyms {
  uint64_t linkwatchEvent = 0;
  uint64_t delayedWorkTimerFn = 0;
};

const KernelSyms& kernelSyms() {
  static KernelSyms syms;
  static std::once_flag once;
  std::call_once(once, [] {
    syms.linkwatchEvent = kallsymsAddress("linkwatch_event");
    syms.delayedWorkTimerFn = kallsymsAddress("delayed_work_timer_fn");
  });
  return syms;
}

int silentPrint(enum libbpf_print_level, const char*, va_list) { return 0; }

// Restores the previous libbpf printer on scope exit; probes fail on purpose and would
// otherwise fill the log with verifier dumps.
class QuietLibbpf {
 public:
  QuietLibbpf() : prev_(libbpf_set_print(silentPrint)) {}
  ~QuietLibbpf() { libbpf_set_print(prev_); }

 private:
  libbpf_print_fn_t prev_;
};

Status configure(link_detector* skel, const BpfOptions& o) {
  const auto& syms = kernelSyms();
  skel->rodata->linkwatch_event_addr = syms.linkwatchEvent;
  skel->rodata->delayed_work_timer_fn_addr = syms.delayedWorkTimerFn;
  skel->rodata->retrans_threshold = o.retransThreshold;
  skel->rodata->retrans_window_ns = o.retransWindowNs;
  skel->rodata->retrans_rate_ppm = o.retransRatePpm;
  skel->rodata->degraded_min_interval_ns = o.degradedMinIntervalNs;
  skel->rodata->report_unattributed = o.reportUnattributed ? 1 : 0;
  skel->rodata->report_rdma = o.reportRdma ? 1 : 0;
  skel->rodata->scan_period_ns = o.scanPeriodNs;
  long page = sysconf(_SC_PAGESIZE);
  if (o.ringBytes < static_cast<uint32_t>(page) || (o.ringBytes & (o.ringBytes - 1)) != 0)
    return Status(Errc::kInvalidArgument,
                  "ring-bytes: must be a power of two of at least one page, got " +
                      std::to_string(o.ringBytes));
  if (bpf_map__set_max_entries(skel->maps.events, o.ringBytes) != 0)
    return Status(Errc::kInternal, "bpf: set ring buffer size");
  return Status::Ok();
}

std::string precondition(const Hook& h) {
  const auto& syms = kernelSyms();
  if (h.source == RECCL_LINK_SRC_RAWTP_LINKWATCH) {
    if (!syms.linkwatchEvent)
      return "linkwatch_event address not readable from /proc/kallsyms (needs root, kptr_restrict)";
    if (std::strstr(h.program, "linkwatch_timer") && !syms.delayedWorkTimerFn)
      return "delayed_work_timer_fn address not readable from /proc/kallsyms";
  }
  return {};
}

std::string reasonFor(const Hook& h, const char* step, int err) {
  std::string what = std::string(step) + ": " + std::strerror(err);
  if (h.source == RECCL_LINK_SRC_FENTRY_CARRIER || h.source == RECCL_LINK_SRC_FENTRY_IB_DISPATCH) {
    if (h.source == RECCL_LINK_SRC_FENTRY_IB_DISPATCH && err == ESRCH)
      return "ib_dispatch_event not in this kernel (no RDMA core): " + what;
    return "fentry not supported by this kernel: " + what;
  }
  return what;
}

// Loads and attaches one program alone; "" on success, else why not. Programs without an
// attach point (the "syscall" resolver) are only loaded.
std::string probeOne(const Hook& h, const BpfOptions& opts, bool attach = true) {
  if (auto pre = precondition(h); !pre.empty()) return pre;
  QuietLibbpf quiet;
  link_detector* skel = link_detector::open();
  if (!skel) return std::string("open skeleton: ") + std::strerror(errno);
  std::string reason;
  Status st = configure(skel, opts);
  if (!st.ok()) {
    link_detector::destroy(skel);
    return st.message();
  }
  bpf_program* target = nullptr;
  bpf_program* p;
  bpf_object__for_each_program(p, skel->obj) {
    bool me = std::strcmp(bpf_program__name(p), h.program) == 0;
    bpf_program__set_autoload(p, me);
    if (me) target = p;
  }
  int err = link_detector::load(skel);
  if (err) {
    reason = reasonFor(h, "load", -err);
  } else if (!attach) {
  } else if (bpf_link* l = bpf_program__attach(target)) {
    bpf_link__destroy(l);
  } else {
    reason = reasonFor(h, "attach", errno);
  }
  link_detector::destroy(skel);
  return reason;
}

}  // namespace

std::vector<HookStatus> BpfSource::probe(const BpfOptions& opts) {
  std::vector<HookStatus> out;
  for (const Hook& h : kHooks) {
    HookStatus hs;
    hs.program = h.program;
    hs.source = h.source;
    if (!opts.sources.empty() && !opts.sources.count(h.source)) {
      hs.reason = "not requested";
    } else if (h.fallbackOf) {
      bool primaryOk = false;
      for (const auto& prev : out)
        if (prev.program == h.fallbackOf && prev.active) primaryOk = true;
      if (primaryOk)
        hs.reason = std::string("not needed: ") + h.fallbackOf + " is active";
      else
        hs.reason = probeOne(h, opts);
    } else {
      hs.reason = probeOne(h, opts);
    }
    hs.active = hs.reason.empty();
    out.push_back(std::move(hs));
  }
  // The carrier trampolines are one source: both or neither.
  bool off = false, on = false;
  for (auto& hs : out) {
    if (hs.program == "fexit_carrier_off") off = hs.active;
    if (hs.program == "fexit_carrier_on") on = hs.active;
  }
  if (off != on)
    for (auto& hs : out)
      if (hs.source == RECCL_LINK_SRC_FENTRY_CARRIER && hs.active) {
        hs.active = false;
        hs.reason = "its pair did not load";
      }
  return out;
}

int BpfSource::onRingRecord(void* ctx, void* data, size_t size) {
  auto* self = static_cast<BpfSource*>(ctx);
  const auto* e = static_cast<const reccl_link_event*>(data);
  if (size < sizeof(reccl_link_event) || e->abi_version != RECCL_LINK_ABI_VERSION ||
      e->size != sizeof(reccl_link_event)) {
    self->abiRejects_++;
    return 0;
  }
  self->consumed_++;
  if (self->handler_) self->handler_(*e);
  return 0;
}

Result<std::unique_ptr<BpfSource>> BpfSource::open(const BpfOptions& opts, RecordHandler handler) {
  std::unique_ptr<BpfSource> src(new BpfSource());
  src->handler_ = std::move(handler);
  src->hooks_ = probe(opts);
  bool any = false;
  bool allPerm = true;
  for (const auto& h : src->hooks_) {
    any |= h.active;
    if (!h.active && h.reason.find(std::strerror(EPERM)) == std::string::npos) allPerm = false;
  }
  if (!any) {
    if (allPerm && geteuid() != 0)
      return Status(Errc::kPermission, "bpf: loading programs needs CAP_BPF and CAP_PERFMON (run as root)");
    std::string why;
    for (const auto& h : src->hooks_)
      if (h.reason != "not requested") why += " " + h.program + " (" + h.reason + ");";
    return Status(Errc::kUnsupported, "bpf: no link hook loads on this kernel:" + why);
  }

  // The device resolver serves the link-watch hook; without it userspace reads the devices.
  bool resolver = false;
  if (src->activeSources().count(RECCL_LINK_SRC_RAWTP_LINKWATCH)) {
    Hook rh{"resolve_devices", RECCL_LINK_SRC_RAWTP_LINKWATCH, nullptr};
    std::string why = probeOne(rh, opts, false);
    resolver = why.empty();
    if (!resolver)
      RECCL_INFO(kLogDetector, "bpf: resolve_devices unavailable (%s): link-watch pairs in userspace", why.c_str());
  }

  src->skel_ = link_detector::open();
  if (!src->skel_) return Status::FromErrno(errno, "bpf: open link_detector skeleton");
  RECCL_TRY(configure(src->skel_, opts));
  bpf_program* p;
  bpf_object__for_each_program(p, src->skel_->obj) {
    bool active = resolver && std::strcmp(bpf_program__name(p), "resolve_devices") == 0;
    for (const auto& h : src->hooks_)
      if (h.active && h.program == bpf_program__name(p)) active = true;
    bpf_program__set_autoload(p, active);
  }
  if (int err = link_detector::load(src->skel_); err)
    return Status::FromErrno(-err, "bpf: load link_detector");
  if (resolver) src->resolveFd_ = bpf_program__fd(src->skel_->progs.resolve_devices);
  bpf_object__for_each_program(p, src->skel_->obj) {
    if (!bpf_program__autoload(p) || p == src->skel_->progs.resolve_devices) continue;
    bpf_link* l = bpf_program__attach(p);
    if (!l) return Status::FromErrno(errno, std::string("bpf: attach ") + bpf_program__name(p));
    src->links_.push_back(l);
  }

  src->ring_ = ring_buffer__new(bpf_map__fd(src->skel_->maps.events), onRingRecord, src.get(), nullptr);
  if (!src->ring_) return Status::FromErrno(errno, "bpf: ring_buffer__new");

  src->slotsBytes_ = sizeof(reccl_link_slot) * RECCL_LINK_MAX_SLOTS;
  long page = sysconf(_SC_PAGESIZE);
  src->slotsBytes_ = (src->slotsBytes_ + page - 1) / page * page;
  void* m = mmap(nullptr, src->slotsBytes_, PROT_READ | PROT_WRITE, MAP_SHARED,
                 bpf_map__fd(src->skel_->maps.link_state), 0);
  if (m == MAP_FAILED) return Status::FromErrno(errno, "bpf: mmap link_state");
  src->slots_ = static_cast<reccl_link_slot*>(m);

  std::string active;
  for (const auto& h : src->hooks_)
    if (h.active) active += std::string(active.empty() ? "" : ",") + h.program;
  RECCL_INFO(kLogDetector, "bpf: active hooks %s", active.c_str());
  return src;
}

BpfSource::~BpfSource() {
  if (ring_) ring_buffer__free(ring_);
  for (bpf_link* l : links_) bpf_link__destroy(l);
  if (slots_) munmap(slots_, slotsBytes_);
  if (skel_) link_detector::destroy(skel_);
}

std::set<LinkSource> BpfSource::activeSources() const {
  std::set<LinkSource> s;
  for (const auto& h : hooks_)
    if (h.active) s.insert(h.source);
  return s;
}

int BpfSource::epollFd() const { return ring_buffer__epoll_fd(ring_); }
int BpfSource::linkStateMapFd() const { return bpf_map__fd(skel_->maps.link_state); }

Result<int> BpfSource::linkStateShareFd() const {
  // A BPF_F_RDONLY fd cannot be mmapped at all (the kernel insists on VM_SHARED, which a
  // read-only file never gets), and freezing the map would stop the detector's own writes:
  // the receiver gets a duplicate of the map fd and maps it PROT_READ. Who may receive it is
  // decided by the daemon socket's permissions.
  int fd = fcntl(linkStateMapFd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "bpf: dup link_state fd");
  return fd;
}

int BpfSource::consume() {
  // ring_buffer's callback gets only our context pointer; records are handed over here so
  // the handler sees them in order, on the consuming thread.
  return ring_buffer__consume(ring_);
}

Status BpfSource::watch(LinkKey key, uint32_t slot) {
  reccl_link_key k{key.netnsIno, key.ifindex};
  // A reused slot starts with the new link's sums, not the last link's.
  if (slot < RECCL_LINK_MAX_SLOTS) std::memset(&skel_->bss->retrans_windows[slot], 0, sizeof(reccl_retrans_window));
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.watch), &k, &slot, BPF_ANY) != 0)
    return Status::FromErrno(errno, "bpf: add to watch map");
  return Status::Ok();
}

Status BpfSource::unwatch(LinkKey key) {
  reccl_link_key k{key.netnsIno, key.ifindex};
  if (bpf_map_delete_elem(bpf_map__fd(skel_->maps.watch), &k) != 0 && errno != ENOENT)
    return Status::FromErrno(errno, "bpf: remove from watch map");
  return Status::Ok();
}

void BpfSource::setSlotCount(uint32_t n) {
  __atomic_store_n(&skel_->bss->slot_count, n, __ATOMIC_RELEASE);
}

Result<uint32_t> BpfSource::resolveDevices(int netnsFd, uint32_t netnsIno) {
  if (resolveFd_ < 0) return Status(Errc::kUnsupported, "bpf: resolve_devices not loaded");
  reccl_link_resolve_ctx ctx{netnsIno, 0};
  int err = 0;
  int ret = 0;
  auto run = [&] {
    LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &ctx, .ctx_size_in = sizeof(ctx));
    if (bpf_prog_test_run_opts(resolveFd_, &o) != 0) {
      err = errno;
      return;
    }
    ret = static_cast<int>(o.retval);
  };
  if (netnsFd < 0) {
    run();
  } else {
    // The program reads the calling thread's namespace: run it from a thread inside it.
    std::thread t([&] {
      if (setns(netnsFd, CLONE_NEWNET) != 0) {
        err = errno;
        return;
      }
      run();
    });
    t.join();
  }
  if (err) return Status::FromErrno(err, "bpf: run resolve_devices");
  if (ret != 0) return Status(Errc::kInternal, "bpf: resolve_devices ran in the wrong namespace");
  return ctx.resolved;
}

void BpfSource::forgetDevice(uint32_t slot) {
  uint64_t zero = 0;
  bpf_map_update_elem(bpf_map__fd(skel_->maps.slot_dev), &slot, &zero, BPF_ANY);
}

void BpfSource::setWatchCount(uint32_t n) {
  __atomic_store_n(&skel_->bss->watch_count, n, __ATOMIC_RELEASE);
}

BpfCounters BpfSource::counters() const {
  BpfCounters c;
  const auto& k = skel_->bss->counters;
  c.ringbufDrops = __atomic_load_n(&k.ringbuf_drops, __ATOMIC_RELAXED);
  c.events = __atomic_load_n(&k.events, __ATOMIC_RELAXED);
  c.dqlStalls = __atomic_load_n(&k.dql_stalls, __ATOMIC_RELAXED);
  for (int i = 0; i < RECCL_LINK_SRC_COUNT; ++i)
    c.hookHits[i] = __atomic_load_n(&k.hook_hits[i], __ATOMIC_RELAXED);
  c.consumed = consumed_;
  c.abiRejects = abiRejects_;
  return c;
}

RetransWindowStats BpfSource::retransWindow(uint32_t slot) const {
  RetransWindowStats r;
  if (slot >= RECCL_LINK_MAX_SLOTS) return r;
  auto load = [](const uint64_t& v) { return __atomic_load_n(&v, __ATOMIC_RELAXED); };
  const reccl_retrans_window& w = skel_->bss->retrans_windows[slot];
  const reccl_link_slot& s = slots_[slot];
  r.retransmits = load(s.retransmits);
  r.windowRetransmits = load(s.retrans_window);
  r.windowRetransSegs = load(w.retrans_segs);
  r.windowSentSegs = load(w.sent_segs);
  r.lastRetransmits = load(w.last_retransmits);
  r.lastRetransSegs = load(w.last_retrans_segs);
  r.lastSentSegs = load(w.last_sent_segs);
  r.heldByRate = load(w.held);
  r.failedAttempts = load(w.failed);
  return r;
}

}  // namespace reccl::detector
