// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Link-fault detector. Every program here is independent: userspace (detector/bpf_source.cpp)
 * probes each one alone, then autoloads only those this kernel accepts.
 *
 * Programs that see a device turn its (netns, ifindex) into a slot through the watch map and
 * report only watched devices, and only on a change of the slot's state (compare-and-swap), so
 * the several hooks that fire for one carrier loss produce one record, from the earliest hook.
 * The slot's epoch is bumped on every change: a data path learns of a fault with one load. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "reccl_bpf/link_event.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by userspace before load. */
const volatile __u64 linkwatch_event_addr = 0;      /* &linkwatch_event from /proc/kallsyms */
const volatile __u64 delayed_work_timer_fn_addr = 0; /* &delayed_work_timer_fn */
const volatile __u32 retrans_threshold = 12;         /* retransmits per window -> DEGRADED */
const volatile __u64 retrans_window_ns = 500000000;  /* 500 ms */
const volatile __u32 retrans_rate_ppm = 3000;        /* and retransmitted/sent segments; 0: off */
/* Closed windows pooled when a window stays under the count; 0: off (at most
 * RECCL_RETRANS_POOL_MAX). */
const volatile __u32 retrans_pool_windows = RECCL_RETRANS_POOL_MAX;
const volatile __u64 degraded_min_interval_ns = 1000000000; /* at most one DEGRADED per second */
/* + 2 RTTs: a retransmit's D-SACK is due. 20 ms, not 1: a receiver that waits for a CPU sends its
 * D-SACKs late, and a burst committed before them counted as loss (fault-free: 19 of 60
 * retransmitted segments early in a window, DEGRADED at 1 ms). */
const volatile __u64 retrans_settle_ns = 20000000;
const volatile __u8 report_unattributed = 0;         /* emit DQL_STALL (names no device) */
const volatile __u8 report_rdma = 0;                 /* emit RDMA port events */

/* Userspace raises this while at least one link is watched; hooks that cannot name a device
 * (link-watch scheduling) stay silent otherwise. */
__u32 watch_count = 0;
struct reccl_link_counters counters = {};
/* Per slot: the closed retransmit windows behind the pooled judgement ("gray failures" below). */
struct reccl_retrans_pool retrans_pools[RECCL_LINK_MAX_SLOTS] = {};

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, RECCL_LINK_MAX_SLOTS);
  __type(key, struct reccl_link_key);
  __type(value, __u32);
} watch SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, RECCL_LINK_MAX_SLOTS);
  __type(key, __u32);
  __type(value, struct reccl_link_slot);
} link_state SEC(".maps");

/* Kernel address of each slot's net_device, filled by resolve_devices; 0 when unknown. Read
 * only through bpf_probe_read_kernel and re-validated (ifindex, netns) on every use, since a
 * device can go away between resolution and use. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, RECCL_LINK_MAX_SLOTS);
  __type(key, __u32);
  __type(value, __u64);
} slot_dev SEC(".maps");

/* Highest slot index in use + 1; bounds the link-watch scan. */
__u32 slot_count = 0;
/* Per slot, set by userspace: 1 when link-watch treats the device's carrier changes as urgent
 * while it runs -- its iflink differs from its ifindex (rtnetlink's IFLA_LINK: veth, vlan,
 * macvlan). 0: not, or not known -- a physical NIC, tun/tap, a veth whose peer has its ifindex. */
__u8 slot_linkwatch_urgent[RECCL_LINK_MAX_SLOTS] = {};

static __always_inline void count_hit(int src)
{
  if (src > 0 && src < RECCL_LINK_SRC_COUNT)
    __sync_fetch_and_add(&counters.hook_hits[src], 1);
}

static __always_inline __u32 dev_netns(struct net_device *dev)
{
  return BPF_CORE_READ(dev, nd_net.net, ns.inum);
}

static __always_inline struct reccl_link_slot *watched_slot(struct net_device *dev, __u32 *slot_idx)
{
  struct reccl_link_key key = {};
  key.netns_ino = dev_netns(dev);
  key.ifindex = BPF_CORE_READ(dev, ifindex);
  __u32 *idx = bpf_map_lookup_elem(&watch, &key);
  if (!idx)
    return NULL;
  *slot_idx = *idx;
  return bpf_map_lookup_elem(&link_state, idx);
}

/* RECCL_LINK_STATE_ADMIN_UP | CARRIER as the kernel has them now. */
static __always_inline __u32 dev_health(struct net_device *dev)
{
  unsigned long st = BPF_CORE_READ(dev, state);
  __u32 h = 0;
  if (st & (1UL << bpf_core_enum_value(enum netdev_state_t, __LINK_STATE_START)))
    h |= RECCL_LINK_STATE_ADMIN_UP;
  if (!(st & (1UL << bpf_core_enum_value(enum netdev_state_t, __LINK_STATE_NOCARRIER))))
    h |= RECCL_LINK_STATE_CARRIER;
  return h;
}

static __always_inline __u64 dev_carrier_seq(struct net_device *dev)
{
  __u64 down = (__u32)BPF_CORE_READ(dev, carrier_down_count.counter);
  __u64 up = (__u32)BPF_CORE_READ(dev, carrier_up_count.counter);
  return (down << 32) | up;
}

static __always_inline void emit(__u16 kind, __u16 src, __u64 ts, __u32 netns, __u32 ifindex,
                                 __u32 slot, __u32 state, __u64 value, struct net_device *dev)
{
  struct reccl_link_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    __sync_fetch_and_add(&counters.ringbuf_drops, 1);
    return;
  }
  e->abi_version = RECCL_LINK_ABI_VERSION;
  e->kind = kind;
  e->size = sizeof(*e);
  e->source = src;
  e->ts_ns = ts;
  e->netns_ino = netns;
  e->ifindex = ifindex;
  e->slot = slot;
  e->state = state;
  e->value = value;
  e->reserved = 0;
  if (dev)
    BPF_CORE_READ_STR_INTO(&e->ifname, dev, name);
  else
    e->ifname[0] = 0;
  bpf_ringbuf_submit(e, 0);
  __sync_fetch_and_add(&counters.events, 1);
}

/* Compares the device's state with its slot; on a change (won by exactly one CPU through
 * compare-and-swap) bumps the epoch and reports the transition. */
static __always_inline int report_state(struct net_device *dev, __u16 src)
{
  if (!dev)
    return 0;
  __u32 slot_idx = 0;
  struct reccl_link_slot *slot = watched_slot(dev, &slot_idx);
  if (!slot)
    return 0;
  count_hit(src);
  __u64 ts = bpf_ktime_get_ns();
  __u32 now = dev_health(dev);
  __u64 old = slot->state;
  int won = 0;
  for (int i = 0; i < 4; i++) {
    if ((old & RECCL_LINK_STATE_HEALTHY) == now)
      return 0;
    __u64 next = (old & ~(__u64)RECCL_LINK_STATE_HEALTHY) | now;
    __u64 prev = __sync_val_compare_and_swap(&slot->state, old, next);
    if (prev == old) {
      won = 1;
      break;
    }
    old = prev;
  }
  if (!won)
    return 0;
  __sync_fetch_and_add(&slot->epoch, 1);
  slot->last_change_ns = ts;
  /* Retransmits from before a change (a link down, back up) say nothing of the link after it. */
  if (slot_idx < RECCL_LINK_MAX_SLOTS)
    retrans_pools[slot_idx].floor_ns = ts;

  /* Only a change of usability is an event: a link is usable when admin up with carrier. */
  int was_healthy = (old & RECCL_LINK_STATE_HEALTHY) == RECCL_LINK_STATE_HEALTHY;
  int is_healthy = now == RECCL_LINK_STATE_HEALTHY;
  if (was_healthy == is_healthy)
    return 0;
  __u16 kind;
  if (is_healthy)
    kind = (old & RECCL_LINK_STATE_ADMIN_UP) ? RECCL_LINK_KIND_CARRIER_UP : RECCL_LINK_KIND_ADMIN_UP;
  else
    kind = (now & RECCL_LINK_STATE_ADMIN_UP) ? RECCL_LINK_KIND_CARRIER_DOWN : RECCL_LINK_KIND_ADMIN_DOWN;
  emit(kind, src, ts, dev_netns(dev), BPF_CORE_READ(dev, ifindex), slot_idx, now,
       dev_carrier_seq(dev), dev);
  return 0;
}

/* --- carrier: BPF trampolines (production kernels) ---------------------------------------- */

SEC("fexit/netif_carrier_off")
int BPF_PROG(fexit_carrier_off, struct net_device *dev)
{
  return report_state(dev, RECCL_LINK_SRC_FENTRY_CARRIER);
}

SEC("fexit/netif_carrier_on")
int BPF_PROG(fexit_carrier_on, struct net_device *dev)
{
  return report_state(dev, RECCL_LINK_SRC_FENTRY_CARRIER);
}

/* --- carrier loss / admin down: the device's qdiscs are reset when it is deactivated ------- */

static __always_inline int on_qdisc_reset(struct Qdisc *q)
{
  struct net_device *dev = BPF_CORE_READ(q, dev_queue, dev);
  return report_state(dev, RECCL_LINK_SRC_TP_QDISC_RESET);
}

SEC("tp_btf/qdisc_reset")
int BPF_PROG(tp_qdisc_reset, struct Qdisc *q)
{
  return on_qdisc_reset(q);
}

/* Same hook for kernels whose tp_btf attach fails. */
SEC("raw_tp/qdisc_reset")
int rawtp_qdisc_reset(struct bpf_raw_tracepoint_args *ctx)
{
  return on_qdisc_reset((struct Qdisc *)ctx->args[0]);
}

/* --- link-watch scheduling: the earliest carrier signal without trampolines ---------------- */

struct scan_ctx {
  __u32 found;     /* watched devices read */
  __u32 nonurgent; /* of them, devices whose carrier changes link-watch may hold back */
};

static __always_inline int report_state(struct net_device *dev, __u16 src);

/* One slot of the link-watch scan: re-validate the remembered device, then report it like
 * any hook that names its device. */
static long scan_slot(__u32 i, struct scan_ctx *sc)
{
  __u32 idx = i;
  __u64 *addr = bpf_map_lookup_elem(&slot_dev, &idx);
  if (!addr || !*addr)
    return 0;
  struct reccl_link_slot *slot = bpf_map_lookup_elem(&link_state, &idx);
  if (!slot)
    return 0;
  struct net_device *dev = (struct net_device *)*addr;
  if (BPF_CORE_READ(dev, ifindex) != (int)slot->ifindex || dev_netns(dev) != slot->netns_ino)
    return 0;
  sc->found++;
  if (idx < RECCL_LINK_MAX_SLOTS && !slot_linkwatch_urgent[idx])
    sc->nonurgent++;
  report_state(dev, RECCL_LINK_SRC_RAWTP_LINKWATCH);
  return 0;
}

static __always_inline void scan_watched(struct scan_ctx *sc)
{
  __u32 n = slot_count;
  if (n > RECCL_LINK_MAX_SLOTS)
    n = RECCL_LINK_MAX_SLOTS;
  bpf_loop(n, scan_slot, sc, 0);
}

/* Link-watch can hold a watched device's carrier change back without any hook firing:
 * - an urgent change (a running device whose iflink is another device, e.g. a veth) while an
 *   urgent run is queued but has not started: it joins that run, whose queueing came before;
 * - a non-urgent change (a device that is its own iflink, e.g. a physical NIC) within a second
 *   of the last run: link-watch arms its delayed work's timer, or nothing if that is pending.
 * For those windows a BPF timer re-reads the watched devices every scan_period_ns, in the
 * kernel: from each queueing of link-watch's work until its run ends, and for a second after
 * that run when a watched device is of the non-urgent kind. */
const volatile __u64 scan_period_ns = 100000;      /* 100 us; 0 disables the scan */
/* From a queueing: the cap when the run's hook is not attached (link-watch holds non-urgent
 * events up to 1 s after its last run, which starts after this queueing; the extra 250 ms cover
 * the worker's start on a loaded machine). */
const volatile __u64 scan_window_ns = 1250000000;
/* From the end of a run, while a non-urgent watched device may have a change held back. */
const volatile __u64 scan_after_run_ns = 1100000000;

struct scan_timer {
  struct bpf_timer timer;
  __u64 until_ns;
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct scan_timer);
} scan_timers SEC(".maps");

static int scan_timer_fired(void *map, __u32 *key, struct scan_timer *st)
{
  if (!watch_count)
    return 0;
  __sync_fetch_and_add(&counters.scan_runs, 1);
  struct scan_ctx sc = {};
  scan_watched(&sc);
  if (bpf_ktime_get_ns() < st->until_ns)
    bpf_timer_start(&st->timer, scan_period_ns, 0);
  return 0;
}

static __always_inline struct scan_timer *scan_timer(void)
{
  __u32 zero = 0;
  return scan_period_ns ? bpf_map_lookup_elem(&scan_timers, &zero) : NULL;
}

/* Scans every scan_period_ns until `until_ns`; 0 ends a running scan at its next firing.
 * `seen` is the deadline the caller read before it decided (~0: set it whatever it is now): a
 * deadline that another CPU's queueing hook moved meanwhile is that newer queueing's, and
 * stays. */
static __always_inline void scan_until(__u64 until_ns, __u64 seen)
{
  struct scan_timer *st = scan_timer();
  if (!st)
    return;
  if (seen == ~0ULL)
    st->until_ns = until_ns;
  else if (__sync_val_compare_and_swap(&st->until_ns, seen, until_ns) != seen)
    return;
  if (!until_ns)
    return;
  bpf_timer_init(&st->timer, &scan_timers, 1 /* CLOCK_MONOTONIC */); /* -EBUSY once set up */
  bpf_timer_set_callback(&st->timer, scan_timer_fired);
  bpf_timer_start(&st->timer, scan_period_ns, 0);
}

/* Devices not resolved (resolve_devices unavailable): let userspace read them. */
static __always_inline void report_unresolved(const struct scan_ctx *sc)
{
  if (sc->found < watch_count)
    emit(RECCL_LINK_KIND_LINKWATCH_SCHEDULED, RECCL_LINK_SRC_RAWTP_LINKWATCH, bpf_ktime_get_ns(),
         0, 0, RECCL_LINK_NO_SLOT, 0, 0, NULL);
}

static __always_inline int on_linkwatch_queued(int with_timer)
{
  if (!watch_count)
    return 0;
  count_hit(RECCL_LINK_SRC_RAWTP_LINKWATCH);
  /* The device whose carrier changed has its state bit set already: read every watched
   * device now, in the kernel, and report those that changed. */
  struct scan_ctx sc = {};
  scan_watched(&sc);
  if (with_timer)
    scan_until(bpf_ktime_get_ns() + scan_window_ns, ~0ULL);
  report_unresolved(&sc);
  return 0;
}

/* Local flavour: the build host's vmlinux.h may predate the enum's name. */
enum work_bits___reccl { WORK_STRUCT_PENDING_BIT___reccl = 0 };

/* A run has ended: every change it was queued for, or that joined it, is visible now. Changes
 * after it are queued anew (urgent) or, for a non-urgent device, may be held for a second. The
 * work may be queued again already (an urgent change during the run, which later urgent changes
 * join): the scan then stays on for that run, whose end comes here again. Pending on its timer
 * instead (a non-urgent change, of any device, held for the rest of the second) is no such
 * window: an urgent change then queues the work at once, through the queueing hook. */
static __always_inline int on_linkwatch_ran(struct work_struct *work, int with_timer)
{
  if (!watch_count)
    return 0;
  count_hit(RECCL_LINK_SRC_RAWTP_LINKWATCH);
  /* The deadline as of before this hook reads the work's state: a queueing on another CPU
   * sets PENDING first and the deadline after, so one this hook did not see pending has its
   * newer deadline kept by the compare-and-swap in scan_until. */
  struct scan_timer *st = with_timer ? scan_timer() : NULL;
  __u64 seen = st ? __sync_val_compare_and_swap(&st->until_ns, 0, 0) : ~0ULL; /* ordered read */
  struct scan_ctx sc = {};
  scan_watched(&sc);
  if (with_timer) {
    __u64 now = bpf_ktime_get_ns();
    /* WORK_STRUCT_PENDING_BIT from the running kernel's BTF where its enum has a name (work_bits,
     * since 6.9); before that it sits in an anonymous enum, and has always been bit 0. */
    __u32 pending_bit = 0;
    if (bpf_core_enum_value_exists(enum work_bits___reccl, WORK_STRUCT_PENDING_BIT___reccl))
      pending_bit = bpf_core_enum_value(enum work_bits___reccl, WORK_STRUCT_PENDING_BIT___reccl) & 63;
    int pending = (BPF_CORE_READ(work, data.counter) >> pending_bit) & 1;
    struct delayed_work *dw = (void *)work - bpf_core_field_offset(struct delayed_work, work);
    int on_timer = BPF_CORE_READ(dw, timer.entry.pprev) != NULL;
    int queued_again = pending && !on_timer;
    if (queued_again)
      scan_until(now + scan_window_ns, seen);
    else
      scan_until(sc.nonurgent || sc.found < watch_count ? now + scan_after_run_ns : 0, seen);
  }
  report_unresolved(&sc);
  return 0;
}

static __always_inline int is_linkwatch_work(struct work_struct *work)
{
  return linkwatch_event_addr && (__u64)BPF_CORE_READ(work, func) == linkwatch_event_addr;
}

static __always_inline int is_linkwatch_timer(struct timer_list *timer)
{
  if (!linkwatch_event_addr || !delayed_work_timer_fn_addr)
    return 0;
  if ((__u64)BPF_CORE_READ(timer, function) != delayed_work_timer_fn_addr)
    return 0;
  struct delayed_work *dw = (void *)timer - bpf_core_field_offset(struct delayed_work, timer);
  return (__u64)BPF_CORE_READ(dw, work.func) == linkwatch_event_addr;
}

/* Immediate (urgent) scheduling: queue_work(linkwatch_work). BTF-typed, so it may arm the
 * scan timer (raw tracepoints may not use BPF timers). */
SEC("tp_btf/workqueue_queue_work")
int BPF_PROG(linkwatch_queue, int req_cpu, struct pool_workqueue *pwq, struct work_struct *work)
{
  if (!is_linkwatch_work(work))
    return 0;
  return on_linkwatch_queued(1);
}

/* The end of a link-watch run. BTF-typed, so it may end or extend the scan. */
SEC("tp_btf/workqueue_execute_end")
int BPF_PROG(linkwatch_ran, struct work_struct *work)
{
  if (!is_linkwatch_work(work))
    return 0;
  return on_linkwatch_ran(work, 1);
}

/* No tp_btf twin on timer_start: that tracepoint fires on every timer armed on the machine
 * (tens of thousands a second under TCP load), once per loaded copy of this object, which made it
 * the whole zero-fault CPU cost of failover (~5 %). What it saw -- a non-urgent carrier change within a
 * second of the previous link-watch run, which arms the delayed work's timer instead of
 * queueing it -- the scan timer armed by that previous run's queueing sees within
 * scan_period_ns, since every run the work makes is queued through workqueue_queue_work
 * (the delayed work's timer queues it too). */

/* Raw-tracepoint twins for kernels whose tp_btf attach fails. Raw tracepoints may not use BPF
 * timers, so there is no scan there and the timer_start twin is what sees a change within the
 * blind second, at the cost above. */
SEC("raw_tp/workqueue_queue_work")
int rawtp_linkwatch_queue(struct bpf_raw_tracepoint_args *ctx)
{
  if (!is_linkwatch_work((struct work_struct *)ctx->args[2]))
    return 0;
  return on_linkwatch_queued(0);
}

SEC("raw_tp/workqueue_execute_end")
int rawtp_linkwatch_ran(struct bpf_raw_tracepoint_args *ctx)
{
  struct work_struct *work = (struct work_struct *)ctx->args[0];
  if (!is_linkwatch_work(work))
    return 0;
  return on_linkwatch_ran(work, 0);
}

SEC("raw_tp/timer_start")
int rawtp_linkwatch_timer(struct bpf_raw_tracepoint_args *ctx)
{
  if (!is_linkwatch_timer((struct timer_list *)ctx->args[0]))
    return 0;
  return on_linkwatch_queued(0);
}

/* --- TX watchdog and byte-queue stalls ---------------------------------------------------- */

SEC("tp_btf/net_dev_xmit_timeout")
int BPF_PROG(tp_xmit_timeout, struct net_device *dev, int queue_index)
{
  __u32 slot_idx = 0;
  struct reccl_link_slot *slot = watched_slot(dev, &slot_idx);
  if (!slot)
    return 0;
  count_hit(RECCL_LINK_SRC_TP_XMIT_TIMEOUT);
  __u64 ts = bpf_ktime_get_ns();
  __sync_fetch_and_add(&slot->epoch, 1);
  emit(RECCL_LINK_KIND_TX_TIMEOUT, RECCL_LINK_SRC_TP_XMIT_TIMEOUT, ts, dev_netns(dev),
       BPF_CORE_READ(dev, ifindex), slot_idx, dev_health(dev), (__u64)queue_index, dev);
  return 0;
}

/* The tracepoint passes only the queue's numbers, not its device: counted, and reported only
 * when userspace asks for unattributed signals. */
SEC("tp_btf/dql_stall_detected")
int BPF_PROG(tp_dql_stall, unsigned short thrs, unsigned int len, unsigned long last_reap,
             unsigned long hist_head, unsigned long now)
{
  __sync_fetch_and_add(&counters.dql_stalls, 1);
  if (report_unattributed && watch_count) {
    count_hit(RECCL_LINK_SRC_TP_DQL_STALL);
    emit(RECCL_LINK_KIND_DQL_STALL, RECCL_LINK_SRC_TP_DQL_STALL, bpf_ktime_get_ns(), 0, 0,
         RECCL_LINK_NO_SLOT, 0, thrs, NULL);
  }
  return 0;
}

/* --- gray failures: TCP retransmissions per device, judged against segments sent ----------- */

/* A count alone is no symptom: a saturated healthy link retransmits too (tail-loss probes and
 * spurious timeouts of starved senders, backlog drops), in proportion to what it sends. So the
 * window also sums, per device, the data segments sent by the sockets that retransmitted (pure
 * ACKs of a socket that also receives would dilute the share), and a link is DEGRADED only when
 * the count crosses retrans_threshold and the lost share of those segments crosses
 * retrans_rate_ppm. Lost: retransmitted, less what the receivers reported as duplicates (D-SACK):
 * a path that reorders packets (a sender moving between CPUs whose veth backlogs drain out of
 * order, ECMP, a NIC's queues) triggers fast retransmits of segments that were never lost, and
 * the receiver's D-SACK says so about an RTT later. The segments come from each socket's own
 * tcp_sock counters, read only here (the program runs on retransmits, never per packet): the
 * deltas since the socket's last commit, kept in socket-local storage. A retransmit is
 * committed to the window only once it is 2 RTTs + retrans_settle_ns old (at a later retransmit
 * of the socket), with the D-SACKs that came in meanwhile: a burst of spurious fast retransmits
 * then arrives in the window together with the D-SACKs that cancel it. */

/* Per socket: the counters as of its last commit to a window, and as of its latest retransmit. */
struct retrans_sock {
  __u64 seen_ns;       /* the last commit covers the socket up to then; 0: no baseline yet */
  __u64 last_ns;       /* the socket's latest retransmit */
  __u32 data_segs_out; /* tcp_sock.data_segs_out at the last commit (retransmits included) */
  __u32 total_retrans; /* tcp_sock.total_retrans at the last commit */
  __u32 dsack_dups;    /* tcp_sock.dsack_dups at the last commit (0 on kernels without it) */
  __u32 last_out;      /* data_segs_out right after the latest retransmit */
  __u32 last_retrans;  /* total_retrans right after the latest retransmit */
  __u32 pad;
};

struct {
  __uint(type, BPF_MAP_TYPE_SK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct retrans_sock);
} retrans_socks SEC(".maps");

/* Per slot: the window's sums (same window as the slot's retrans_window). */
struct reccl_retrans_window retrans_windows[RECCL_LINK_MAX_SLOTS] = {};

/* The tracepoint's err argument exists where the kernel also reports attempts that sent nothing
 * (-EBUSY: the original still sits in a host queue; -ENOMEM): none of them is a lost segment. */
struct trace_event_raw_tcp_retransmit_skb___reccl {
  int err;
} __attribute__((preserve_access_index));

/* Adds this socket's retransmitted and sent segments up to its previous retransmit, and the
 * D-SACKs received until now, to the window, when that previous retransmit is old enough for its
 * D-SACK to have come (2 x srtt + retrans_settle_ns); the segments of this retransmit and of a
 * burst of close ones wait for a later one. A socket seen for the first time only sets its
 * baseline. A baseline older than the window counts only the window's share of what was sent
 * since (an even pace assumed), so that a socket that retransmits once a minute does not bring a
 * minute of traffic into a window. */
static __always_inline void account_socket(const struct sock *sk, __u64 ts, __u64 wstart,
                                           struct reccl_retrans_window *w,
                                           struct reccl_retrans_pool *pool)
{
  struct retrans_sock *rs =
      bpf_sk_storage_get(&retrans_socks, (void *)sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
  if (!rs)
    return;
  const struct tcp_sock *tp = (const void *)sk;
  __u32 out = BPF_CORE_READ(tp, data_segs_out);
  __u32 retrans = BPF_CORE_READ(tp, total_retrans);
  __u32 dups = bpf_core_field_exists(tp->dsack_dups) ? BPF_CORE_READ(tp, dsack_dups) : 0;
  if (!rs->seen_ns) {
    rs->seen_ns = ts;
    rs->data_segs_out = out;
    rs->total_retrans = retrans;
    rs->dsack_dups = dups;
  } else {
    __u64 rtt_ns = (__u64)(BPF_CORE_READ(tp, srtt_us) >> 3) * 1000; /* srtt_us holds 8 x srtt */
    if (ts - rs->last_ns >= 2 * rtt_ns + retrans_settle_ns) {
      /* A previous retransmit from before this window (a dead link's backed-off timeouts, the
       * last one answered after the link came back) belongs to a window already judged: the
       * baseline moves past it without adding to this window. One in the window just closed
       * still goes to that window's pooled sums: a thin flow's last retransmit of a window is
       * committed only at its next one, in the next window, and a thin flow has only a few a
       * window. Older ones go nowhere. */
      __u64 *to_retrans = NULL, *to_dsack = NULL, *to_sent = NULL;
      if (rs->last_ns >= wstart) {
        to_retrans = &w->retrans_segs;
        to_dsack = &w->dsack_segs;
        to_sent = &w->sent_segs;
      } else if (retrans_pool_windows && pool->next) {
        struct reccl_retrans_pooled_window *c = &pool->windows[(pool->next - 1) % RECCL_RETRANS_POOL_MAX];
        if (c->start_ns && rs->last_ns >= c->start_ns) {
          to_retrans = &c->retrans_segs;
          to_dsack = &c->dsack_segs;
          to_sent = &c->sent_segs;
        }
      }
      if (to_retrans) {
        __u64 sent = (__u32)(rs->last_out - rs->data_segs_out);
        __u64 age = rs->last_ns - rs->seen_ns;
        if (age > retrans_window_ns) /* microsecond units keep the product within 64 bits */
          sent = sent * (retrans_window_ns >> 10) / ((age >> 10) | 1);
        __sync_fetch_and_add(to_retrans, (__u32)(rs->last_retrans - rs->total_retrans));
        __sync_fetch_and_add(to_dsack, (__u32)(dups - rs->dsack_dups));
        __sync_fetch_and_add(to_sent, sent);
      }
      rs->seen_ns = rs->last_ns;
      rs->data_segs_out = rs->last_out;
      rs->total_retrans = rs->last_retrans;
      rs->dsack_dups = dups;
    }
  }
  rs->last_ns = ts;
  rs->last_out = out;
  rs->last_retrans = retrans;
}

/* The rate check on a set of sums (a window's, or the pool's): 1 when the lost share of the
 * segments sent reaches retrans_rate_ppm by more than chance; *ppm gets that share. */
static __always_inline int lost_rate_crossed(__u64 sent, __u64 retrans, __u64 dups, __u64 *ppm)
{
  /* Committed retransmits are settled (account_socket), so their D-SACKs are in these sums. */
  __u64 lost = retrans > dups ? retrans - dups : 0;
  /* More lost than sent: segments without data (SYN, FIN) retransmitted alone. */
  __u64 p = lost >= sent ? (lost ? 1000000 : 0) : lost * 1000000 / sent;
  *ppm = p > 0xffffffffULL ? 0xffffffffULL : p;
  /* And by more than chance: the lost count must exceed what the limit allows of these sent
   * segments by three standard deviations of a count (excess >= 3 sqrt(lost); in integers
   * excess^2 >= 9 lost). More than one: segments are retransmitted (and D-SACKed) in GSO-sized
   * clumps, so the count spreads wider than a per-segment one. Early in a window a clump a few
   * segments over the allowance crosses the rate alone, and one or two deviations still let such
   * fault-free windows through (docs/results/retransmit-rate.md). A 1 % loss (60-200 of 10-18k
   * segments) clears three by far; a link that sends 500 segments a window needs 12 lost. */
  __u64 due = sent * retrans_rate_ppm / 1000000;
  __u64 excess = lost > due ? lost - due : 0;
  return p >= retrans_rate_ppm && excess * excess >= 9 * lost;
}

/* Sums of the pooled evidence: the running window and the closed windows still in the pool. */
struct pool_sums {
  __u64 retransmits, retrans_segs, sent_segs, dsack_segs;
  __u32 closed;  /* closed windows among them */
  __u32 running; /* and the running one (not when it started before the floor) */
  __u64 ppm;     /* the lost rate of the sums, when judged */
};

/* The pooled judgement, for a window that stays under the count. A slow flow -- a few segments a
 * window -- loses too few segments in 500 ms for the count even at a heavy loss, and every loss
 * it recovers by a timeout lowers its count further: the closed windows of the last few seconds
 * add up to the count where one window does not, and the same rate and deviation test judges
 * their sums. Only for thin links: the pooled windows must average fewer segments sent than one
 * window would need to show the count at the limit rate (threshold / rate: 12 / 3 per mille =
 * 4000 segments a window). A busier link's lossy windows reach the count alone, and a busy
 * link's CPU-starved fault-free windows reach several per mille (docs/results/
 * retransmit-rate.md), which the pool would turn from a spike into a sustained rate. Without the
 * rate check (the count alone) there is no pool: fault-free retransmits add up over seconds. */
static __always_inline int pooled_crossed(struct reccl_retrans_pool *pool, struct reccl_link_slot *slot,
                                          struct reccl_retrans_window *w, __u64 n, __u64 ts,
                                          struct pool_sums *ps)
{
  if (!retrans_pool_windows || !retrans_rate_ppm)
    return 0;
  __u64 floor = pool->floor_ns;
  __u64 span = retrans_pool_windows * retrans_window_ns;
  __u64 oldest = ts > span ? ts - span : 0;
  if (floor > oldest)
    oldest = floor;
  if (slot->retrans_window_start_ns >= floor) {
    ps->running = 1;
    ps->retransmits = n;
    ps->retrans_segs = w->retrans_segs;
    ps->sent_segs = w->sent_segs;
    ps->dsack_segs = w->dsack_segs;
  }
  for (int i = 0; i < RECCL_RETRANS_POOL_MAX; i++) {
    struct reccl_retrans_pooled_window *c = &pool->windows[i];
    if (!c->start_ns || c->start_ns < oldest || c->start_ns >= slot->retrans_window_start_ns)
      continue;
    ps->retransmits += c->retransmits;
    ps->retrans_segs += c->retrans_segs;
    ps->sent_segs += c->sent_segs;
    ps->dsack_segs += c->dsack_segs;
    ps->closed++;
  }
  if (!ps->closed || ps->retransmits < retrans_threshold)
    return 0;
  /* sent / windows < threshold * 1e6 / rate, in integers. */
  if (ps->sent_segs * retrans_rate_ppm >= (__u64)retrans_threshold * 1000000 * (ps->closed + ps->running))
    return 0;
  return lost_rate_crossed(ps->sent_segs, ps->retrans_segs, ps->dsack_segs, &ps->ppm);
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tp_tcp_retransmit, const struct sock *sk, const struct sk_buff *skb)
{
  struct net_device *dev = BPF_CORE_READ(sk, sk_dst_cache, dev);
  if (!dev)
    return 0;
  __u32 slot_idx = 0;
  struct reccl_link_slot *slot = watched_slot(dev, &slot_idx);
  if (!slot || slot_idx >= RECCL_LINK_MAX_SLOTS)
    return 0;
  struct reccl_retrans_window *w = &retrans_windows[slot_idx];
  struct reccl_retrans_pool *pool = &retrans_pools[slot_idx];
  /* Dead code, removed at load, on kernels whose tracepoint has no err argument. */
  if (bpf_core_field_exists(struct trace_event_raw_tcp_retransmit_skb___reccl, err) &&
      (int)ctx[2] != 0) {
    __sync_fetch_and_add(&w->failed, 1);
    return 0;
  }
  count_hit(RECCL_LINK_SRC_TP_TCP_RETRANSMIT);
  __u64 ts = bpf_ktime_get_ns();
  __sync_fetch_and_add(&slot->retransmits, 1);
  /* Windows are approximate under concurrency on purpose: a racing reset loses a few counts,
   * never a threshold crossing by a sustained rate. */
  if (ts - slot->retrans_window_start_ns > retrans_window_ns) {
    w->last_retransmits = slot->retrans_window;
    slot->retrans_window_start_ns = ts;
    slot->retrans_window = 0;
  }
  __u64 wstart = slot->retrans_window_start_ns;
  __u64 wold = w->start_ns;
  /* One CPU closes the window (the swap): a second push of it would count its sums twice in
   * the pool, enough to carry a thin link over the count. */
  if (wold != wstart && __sync_val_compare_and_swap(&w->start_ns, wold, wstart) == wold) {
    if (wold) {
      struct reccl_retrans_pooled_window *c = &pool->windows[pool->next % RECCL_RETRANS_POOL_MAX];
      c->start_ns = wold;
      c->retransmits = w->last_retransmits;
      c->retrans_segs = w->retrans_segs;
      c->sent_segs = w->sent_segs;
      c->dsack_segs = w->dsack_segs;
      pool->next++;
    }
    w->last_retrans_segs = w->retrans_segs;
    w->last_sent_segs = w->sent_segs;
    w->last_dsack_segs = w->dsack_segs;
    w->retrans_segs = 0;
    w->sent_segs = 0;
    w->dsack_segs = 0;
  }
  if (retrans_rate_ppm)
    account_socket(sk, ts, wstart, w, pool);
  __u64 n = __sync_fetch_and_add(&slot->retrans_window, 1) + 1;
  __u64 count = n, ppm = 0;
  if (n >= retrans_threshold) {
    /* A window at the count is judged alone: the pool adds evidence a window lacks, it never
     * overrules a window that has enough. */
    if (retrans_rate_ppm && !lost_rate_crossed(w->sent_segs, w->retrans_segs, w->dsack_segs, &ppm)) {
      __sync_fetch_and_add(&w->held, 1);
      return 0;
    }
  } else {
    struct pool_sums ps = {};
    if (!pooled_crossed(pool, slot, w, n, ts, &ps))
      return 0;
    count = ps.retransmits;
    ppm = ps.ppm;
  }
  __u64 last = slot->last_degraded_ns;
  if (last && ts - last < degraded_min_interval_ns)
    return 0;
  if (__sync_val_compare_and_swap(&slot->last_degraded_ns, last, ts) != last)
    return 0;
  /* Evidence is used once, whichever rule declared: the next pooled DEGRADED rests on windows
   * after this one, so a link whose loss stopped is not declared again from the windows that
   * showed it (a window that reached the count alone stays in the pool too), and clears
   * (RECCL_DEGRADED_CLEAR_MS) while the windows are still in the pool. A lasting slow loss
   * refills the pool within a few seconds, inside that clear time. */
  pool->floor_ns = ts;
  __sync_fetch_and_or(&slot->state, (__u64)RECCL_LINK_STATE_DEGRADED);
  __sync_fetch_and_add(&slot->epoch, 1);
  emit(RECCL_LINK_KIND_DEGRADED, RECCL_LINK_SRC_TP_TCP_RETRANSMIT, ts, dev_netns(dev),
       BPF_CORE_READ(dev, ifindex), slot_idx, dev_health(dev) | RECCL_LINK_STATE_DEGRADED,
       (ppm << 32) | (count & 0xffffffffULL), dev);
  return 0;
}

/* --- RDMA port events (kernels with CONFIG_INFINIBAND) ------------------------------------ */

/* Local views of the RDMA types: this build host's BTF may lack them; CO-RE matches the
 * running kernel's layout when the program is loaded. */
struct ib_device___reccl {
  char name[64];
} __attribute__((preserve_access_index));

/* CO-RE matches a field only against the same BTF kind: the kernel's member is an enum. */
enum ib_event_type___reccl { RECCL_IB_EVENT_TYPE_UNUSED };

struct ib_event___reccl {
  struct ib_device___reccl *device;
  union {
    __u32 port_num;
  } element;
  enum ib_event_type___reccl event;
} __attribute__((preserve_access_index));

/* enum ib_event_type values, stable uapi-adjacent numbering in include/rdma/ib_verbs.h. */
#define RECCL_IB_EVENT_DEVICE_FATAL 8
#define RECCL_IB_EVENT_PORT_ACTIVE 9
#define RECCL_IB_EVENT_PORT_ERR 10

SEC("fentry/ib_dispatch_event")
int BPF_PROG(fentry_ib_dispatch, struct ib_event___reccl *event)
{
  if (!report_rdma)
    return 0;
  int type = BPF_CORE_READ(event, event);
  __u16 kind;
  if (type == RECCL_IB_EVENT_PORT_ERR)
    kind = RECCL_LINK_KIND_RDMA_PORT_ERR;
  else if (type == RECCL_IB_EVENT_PORT_ACTIVE)
    kind = RECCL_LINK_KIND_RDMA_PORT_ACTIVE;
  else if (type == RECCL_IB_EVENT_DEVICE_FATAL)
    kind = RECCL_LINK_KIND_RDMA_DEVICE_FATAL;
  else
    return 0;
  count_hit(RECCL_LINK_SRC_FENTRY_IB_DISPATCH);
  struct reccl_link_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    __sync_fetch_and_add(&counters.ringbuf_drops, 1);
    return 0;
  }
  e->abi_version = RECCL_LINK_ABI_VERSION;
  e->kind = kind;
  e->size = sizeof(*e);
  e->source = RECCL_LINK_SRC_FENTRY_IB_DISPATCH;
  e->ts_ns = bpf_ktime_get_ns();
  e->netns_ino = 0;
  e->ifindex = 0;
  e->slot = RECCL_LINK_NO_SLOT;
  e->state = 0;
  e->value = BPF_CORE_READ(event, element.port_num);
  e->reserved = 0;
  struct ib_device___reccl *ibdev = BPF_CORE_READ(event, device);
  bpf_probe_read_kernel_str(&e->ifname, sizeof(e->ifname), &ibdev->name);
  bpf_ringbuf_submit(e, 0);
  __sync_fetch_and_add(&counters.events, 1);
  return 0;
}

/* --- device resolution, run by userspace inside the watched namespace --------------------- */

struct resolve_walk {
  struct net *net;
  __u32 netns;
  __u32 resolved;
};

static long resolve_slot(__u32 i, struct resolve_walk *w)
{
  __u32 idx = i;
  struct reccl_link_slot *slot = bpf_map_lookup_elem(&link_state, &idx);
  if (!slot || !(slot->state & RECCL_LINK_STATE_VALID) || slot->netns_ino != w->netns)
    return 0;
  struct net *net = w->net; /* a plain local: CO-RE must not relocate our own struct */
  struct hlist_head *heads = BPF_CORE_READ(net, dev_index_head);
  /* NETDEV_HASHENTRIES is 256 (1 << NETDEV_HASHBITS) in every kernel we support. */
  struct hlist_head *head = heads + (slot->ifindex & 255);
  struct hlist_node *node = BPF_CORE_READ(head, first);
  for (int n = 0; n < 16 && node; n++) {
    struct net_device *dev =
        (void *)node - bpf_core_field_offset(struct net_device, index_hlist);
    if (BPF_CORE_READ(dev, ifindex) == (int)slot->ifindex) {
      __u64 addr = (__u64)dev;
      bpf_map_update_elem(&slot_dev, &idx, &addr, BPF_ANY);
      w->resolved++;
      return 0;
    }
    node = BPF_CORE_READ(node, next);
  }
  return 0;
}

SEC("syscall")
int resolve_devices(struct reccl_link_resolve_ctx *ctx)
{
  struct task_struct *task = (struct task_struct *)bpf_get_current_task();
  struct resolve_walk w = {};
  struct net *net = BPF_CORE_READ(task, nsproxy, net_ns);
  w.net = net;
  w.netns = BPF_CORE_READ(net, ns.inum);
  if (w.netns != ctx->netns_ino)
    return -1;
  bpf_loop(RECCL_LINK_MAX_SLOTS, resolve_slot, &w, 0);
  ctx->resolved = w.resolved;
  return 0;
}
