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
const volatile __u32 retrans_threshold = 50;         /* retransmits per window -> DEGRADED */
const volatile __u64 retrans_window_ns = 100000000;  /* 100 ms */
const volatile __u64 degraded_min_interval_ns = 1000000000; /* at most one DEGRADED per second */
const volatile __u8 report_unattributed = 0;         /* emit DQL_STALL (names no device) */
const volatile __u8 report_rdma = 0;                 /* emit RDMA port events */

/* Userspace raises this while at least one link is watched; hooks that cannot name a device
 * (link-watch scheduling) stay silent otherwise. */
__u32 watch_count = 0;
struct reccl_link_counters counters = {};

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

static __always_inline int on_linkwatch_queued(void)
{
  if (!watch_count)
    return 0;
  count_hit(RECCL_LINK_SRC_RAWTP_LINKWATCH);
  emit(RECCL_LINK_KIND_LINKWATCH_SCHEDULED, RECCL_LINK_SRC_RAWTP_LINKWATCH, bpf_ktime_get_ns(),
       0, 0, RECCL_LINK_NO_SLOT, 0, 0, NULL);
  return 0;
}

/* Immediate (urgent) scheduling: queue_work(linkwatch_work). */
SEC("raw_tp/workqueue_queue_work")
int rawtp_linkwatch_queue(struct bpf_raw_tracepoint_args *ctx)
{
  struct work_struct *work = (struct work_struct *)ctx->args[2];
  if (!linkwatch_event_addr)
    return 0;
  if ((__u64)BPF_CORE_READ(work, func) != linkwatch_event_addr)
    return 0;
  return on_linkwatch_queued();
}

/* Delayed scheduling (non-urgent events within a second of the last run) arms the delayed
 * work's timer instead; the device state has already changed when it is armed. */
SEC("raw_tp/timer_start")
int rawtp_linkwatch_timer(struct bpf_raw_tracepoint_args *ctx)
{
  struct timer_list *timer = (struct timer_list *)ctx->args[0];
  if (!linkwatch_event_addr || !delayed_work_timer_fn_addr)
    return 0;
  if ((__u64)BPF_CORE_READ(timer, function) != delayed_work_timer_fn_addr)
    return 0;
  struct delayed_work *dw = (void *)timer - bpf_core_field_offset(struct delayed_work, timer);
  if ((__u64)BPF_CORE_READ(dw, work.func) != linkwatch_event_addr)
    return 0;
  return on_linkwatch_queued();
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

/* --- gray failures: TCP retransmissions per device, rate over a window -------------------- */

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tp_tcp_retransmit, const struct sock *sk, const struct sk_buff *skb)
{
  struct net_device *dev = BPF_CORE_READ(sk, sk_dst_cache, dev);
  if (!dev)
    return 0;
  __u32 slot_idx = 0;
  struct reccl_link_slot *slot = watched_slot(dev, &slot_idx);
  if (!slot)
    return 0;
  count_hit(RECCL_LINK_SRC_TP_TCP_RETRANSMIT);
  __u64 ts = bpf_ktime_get_ns();
  __sync_fetch_and_add(&slot->retransmits, 1);
  /* Windows are approximate under concurrency on purpose: a racing reset loses a few counts,
   * never a threshold crossing by a sustained rate. */
  if (ts - slot->retrans_window_start_ns > retrans_window_ns) {
    slot->retrans_window_start_ns = ts;
    slot->retrans_window = 0;
  }
  __u64 n = __sync_fetch_and_add(&slot->retrans_window, 1) + 1;
  if (n < retrans_threshold)
    return 0;
  __u64 last = slot->last_degraded_ns;
  if (last && ts - last < degraded_min_interval_ns)
    return 0;
  if (__sync_val_compare_and_swap(&slot->last_degraded_ns, last, ts) != last)
    return 0;
  __sync_fetch_and_or(&slot->state, (__u64)RECCL_LINK_STATE_DEGRADED);
  __sync_fetch_and_add(&slot->epoch, 1);
  emit(RECCL_LINK_KIND_DEGRADED, RECCL_LINK_SRC_TP_TCP_RETRANSMIT, ts, dev_netns(dev),
       BPF_CORE_READ(dev, ifindex), slot_idx, dev_health(dev) | RECCL_LINK_STATE_DEGRADED, n, dev);
  return 0;
}

/* --- RDMA port events (kernels with CONFIG_INFINIBAND) ------------------------------------ */

/* Local views of the RDMA types: this build host's BTF may lack them; CO-RE matches the
 * running kernel's layout when the program is loaded. */
struct ib_device___reccl {
  char name[64];
} __attribute__((preserve_access_index));

struct ib_event___reccl {
  struct ib_device___reccl *device;
  union {
    __u32 port_num;
  } element;
  int event;
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
