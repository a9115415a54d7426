/* The one event ABI between the link detector's BPF programs (bpf/link_detector.bpf.c) and
 * userspace (detector/). Included by both sides; never mirror these types by hand.
 *
 * Every record a program writes into the ring buffer starts with abi_version/kind/size so a
 * reader built against another version refuses it instead of misreading it. Layouts are fixed
 * (explicit padding, static size checks below); append fields only at the end and bump
 * RECCL_LINK_ABI_VERSION when a layout changes. */
#ifndef RECCL_BPF_LINK_EVENT_H
#define RECCL_BPF_LINK_EVENT_H

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
typedef uint16_t reccl_link_u16;
typedef uint32_t reccl_link_u32;
typedef uint64_t reccl_link_u64;
#else
typedef __u16 reccl_link_u16;
typedef __u32 reccl_link_u32;
typedef __u64 reccl_link_u64;
#endif

#define RECCL_LINK_ABI_VERSION 2
#define RECCL_LINK_IFNAMSIZ 16
/* Slots in the mmapable link-state array; also the watch list's capacity. */
#define RECCL_LINK_MAX_SLOTS 256

/* What a program (or a userspace source) saw. */
enum reccl_link_kind {
  RECCL_LINK_KIND_NONE = 0,
  RECCL_LINK_KIND_CARRIER_DOWN = 1,
  RECCL_LINK_KIND_CARRIER_UP = 2,
  RECCL_LINK_KIND_ADMIN_DOWN = 3,
  RECCL_LINK_KIND_ADMIN_UP = 4,
  RECCL_LINK_KIND_TX_TIMEOUT = 5,
  RECCL_LINK_KIND_DQL_STALL = 6,
  RECCL_LINK_KIND_RDMA_PORT_ERR = 7,
  RECCL_LINK_KIND_RDMA_PORT_ACTIVE = 8,
  RECCL_LINK_KIND_RDMA_DEVICE_FATAL = 9,
  RECCL_LINK_KIND_DEGRADED = 10,
  /* The kernel queued its link-watch work: some device changed carrier. The event does not
   * name the device; userspace reads the watched devices' state right away. */
  RECCL_LINK_KIND_LINKWATCH_SCHEDULED = 11,
  RECCL_LINK_KIND_COUNT = 12,
};

/* Which hook or listener produced a signal. */
enum reccl_link_source {
  RECCL_LINK_SRC_NONE = 0,
  RECCL_LINK_SRC_FENTRY_CARRIER = 1,     /* fexit netif_carrier_off/on (trampolines) */
  RECCL_LINK_SRC_TP_QDISC_RESET = 2,     /* qdisc:qdisc_reset (device deactivated) */
  RECCL_LINK_SRC_RAWTP_LINKWATCH = 3,    /* workqueue_queue_work for linkwatch_event */
  RECCL_LINK_SRC_TP_XMIT_TIMEOUT = 4,    /* net:net_dev_xmit_timeout (TX watchdog) */
  RECCL_LINK_SRC_TP_DQL_STALL = 5,       /* napi:dql_stall_detected */
  RECCL_LINK_SRC_FENTRY_IB_DISPATCH = 6, /* fentry ib_dispatch_event (RDMA kernels) */
  RECCL_LINK_SRC_TP_TCP_RETRANSMIT = 7,  /* tcp:tcp_retransmit_skb rate over threshold */
  RECCL_LINK_SRC_RTNETLINK = 8,          /* RTMGRP_LINK listener */
  RECCL_LINK_SRC_RDMA_ASYNC = 9,         /* ibv_get_async_event */
  RECCL_LINK_SRC_INBAND = 10,            /* socket/QP error or stalled progress in the library */
  RECCL_LINK_SRC_RDMA_COUNTERS = 11,     /* an RDMA port's sequence-error counters over threshold */
  RECCL_LINK_SRC_COUNT = 12,
};

/* Bits of reccl_link_slot.state. */
#define RECCL_LINK_STATE_ADMIN_UP (1u << 0)
#define RECCL_LINK_STATE_CARRIER (1u << 1)
#define RECCL_LINK_STATE_DEGRADED (1u << 2)
#define RECCL_LINK_STATE_VALID (1u << 3) /* slot holds a watched link */
#define RECCL_LINK_STATE_HEALTHY (RECCL_LINK_STATE_ADMIN_UP | RECCL_LINK_STATE_CARRIER)

/* One ring-buffer record. 64 bytes. */
struct reccl_link_event {
  reccl_link_u16 abi_version; /* RECCL_LINK_ABI_VERSION */
  reccl_link_u16 kind;        /* enum reccl_link_kind */
  reccl_link_u16 size;        /* sizeof(struct reccl_link_event) */
  reccl_link_u16 source;      /* enum reccl_link_source */
  reccl_link_u64 ts_ns;       /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
  reccl_link_u32 netns_ino;   /* inode of the device's network namespace; 0 unknown */
  reccl_link_u32 ifindex;     /* 0 when the hook does not name a device */
  reccl_link_u32 slot;        /* link-state slot, or RECCL_LINK_NO_SLOT */
  reccl_link_u32 state;       /* RECCL_LINK_STATE_* seen by the program */
  /* Kind-specific: carrier kinds: (carrier_down_count << 32) | carrier_up_count of the device,
   * a per-device transition sequence that orders signals from different sources;
   * TX_TIMEOUT: queue index; DEGRADED: retransmits in the judged sums, the window's or the
   * pool's (low 32 bits) and, when the rate check is on, lost per million segments sent in them
   * (high 32 bits); from RDMA_COUNTERS: the window's sequence errors (low 32 bits) and their
   * share per million packets (high 32 bits; 0 when the port counts no packets);
   * RDMA: port number. */
  reccl_link_u64 value;
  char ifname[RECCL_LINK_IFNAMSIZ];
  reccl_link_u64 reserved;
};
#define RECCL_LINK_NO_SLOT 0xffffffffu

/* Watch-list key: a device is watched when (netns inode, ifindex) is in the hash map. */
struct reccl_link_key {
  reccl_link_u32 netns_ino;
  reccl_link_u32 ifindex;
};

/* One element of the BPF_F_MMAPABLE link-state array: one cache line per link. A data path
 * keeps the epoch it last saw and compares with one load; programs and the detector bump it
 * with an atomic add on every change of state. 64-bit fields only: BPF atomics on 32-bit
 * words need a newer instruction set than we build for. */
struct reccl_link_slot {
  reccl_link_u64 epoch;           /* bumped on every state change */
  reccl_link_u64 state;           /* RECCL_LINK_STATE_* as last seen by the kernel side */
  reccl_link_u32 ifindex;
  reccl_link_u32 netns_ino;
  reccl_link_u64 retrans_window;  /* retransmits counted in the current window */
  reccl_link_u64 retrans_window_start_ns;
  reccl_link_u64 last_change_ns;  /* bpf_ktime_get_ns() of the last state change */
  reccl_link_u64 retransmits;     /* total tcp retransmits routed through the device */
  reccl_link_u64 last_degraded_ns;
};

/* Per slot, in the program's .bss (read through the skeleton): the retransmit window's segment
 * sums behind the rate check, and what the check held back. A retransmitted segment the receiver
 * reports as a duplicate (D-SACK) was not lost (reordering, a spurious timeout): the check counts
 * retrans_segs - dsack_segs. */
struct reccl_retrans_window {
  reccl_link_u64 start_ns;          /* the slot's retrans_window_start_ns these sums belong to */
  reccl_link_u64 retrans_segs;      /* segments retransmitted in the window (sockets with a baseline) */
  reccl_link_u64 sent_segs;         /* data segments those sockets sent, retransmits included */
  reccl_link_u64 last_retransmits;  /* the previous window: retransmits counted */
  reccl_link_u64 last_retrans_segs; /* the previous window: retransmitted segments */
  reccl_link_u64 last_sent_segs;    /* the previous window: segments sent */
  reccl_link_u64 held;              /* retransmits over the count threshold held back by the rate */
  reccl_link_u64 failed;            /* tracepoint hits for attempts that sent nothing (not counted) */
  reccl_link_u64 dsack_segs;        /* segments the receivers reported as duplicates (D-SACK) */
  reccl_link_u64 last_dsack_segs;   /* the previous window: D-SACKed segments */
};

/* Closed retransmit windows a slot keeps for the pooled judgement (docs/detector.md, "Gray
 * failures"): with 500 ms windows, about the last 4 s. */
#define RECCL_RETRANS_POOL_MAX 8

/* One closed window's sums, as the slot's reccl_retrans_window held them when it closed. */
struct reccl_retrans_pooled_window {
  reccl_link_u64 start_ns;     /* the window's retrans_window_start_ns; 0: empty */
  reccl_link_u64 retransmits;  /* retransmits counted */
  reccl_link_u64 retrans_segs;
  reccl_link_u64 sent_segs;
  reccl_link_u64 dsack_segs;
};

/* Per slot, in the program's .bss: the last RECCL_RETRANS_POOL_MAX closed windows, a ring. A
 * closed window is evidence while it started within retrans_pool_windows windows of now and not
 * before floor_ns (set when a pooled DEGRADED used the evidence, and on a state change of the
 * link, whose retransmits before it say nothing of the link after it). */
struct reccl_retrans_pool {
  reccl_link_u64 next;      /* ring index (mod RECCL_RETRANS_POOL_MAX) of the next window to close */
  reccl_link_u64 floor_ns;  /* windows that started before this are no evidence */
  struct reccl_retrans_pooled_window windows[RECCL_RETRANS_POOL_MAX];
};

/* Context of the "syscall" program resolve_devices (run with BPF_PROG_TEST_RUN by a thread
 * inside the watched namespace): finds the watched devices of the caller's namespace and
 * remembers their kernel addresses, so hooks that do not name a device can read them. */
struct reccl_link_resolve_ctx {
  reccl_link_u32 netns_ino; /* expected namespace of the calling thread */
  reccl_link_u32 resolved;  /* out: devices found */
};

/* Counters in the program's .bss (read through the skeleton). */
struct reccl_link_counters {
  reccl_link_u64 ringbuf_drops;     /* bpf_ringbuf_reserve failed: ring full */
  reccl_link_u64 events;            /* records submitted */
  reccl_link_u64 hook_hits[RECCL_LINK_SRC_COUNT]; /* program invocations that matched a watch */
  reccl_link_u64 dql_stalls;        /* dql stalls (the tracepoint names no device) */
  reccl_link_u64 scan_runs;         /* link-watch scan timer firings */
};

#ifdef __cplusplus
static_assert(sizeof(reccl_link_event) == 64, "reccl_link_event ABI");
static_assert(sizeof(reccl_link_key) == 8, "reccl_link_key ABI");
static_assert(sizeof(reccl_link_resolve_ctx) == 8, "reccl_link_resolve_ctx ABI");
static_assert(sizeof(reccl_link_slot) == 64, "reccl_link_slot ABI");
static_assert(sizeof(reccl_retrans_window) == 80, "reccl_retrans_window ABI");
static_assert(sizeof(reccl_retrans_pooled_window) == 40, "reccl_retrans_pooled_window ABI");
static_assert(sizeof(reccl_retrans_pool) == 16 + 40 * RECCL_RETRANS_POOL_MAX, "reccl_retrans_pool ABI");
static_assert(sizeof(reccl_link_counters) == 8 * (4 + RECCL_LINK_SRC_COUNT), "reccl_link_counters ABI");
static_assert(offsetof(reccl_link_slot, epoch) == 0, "epoch leads the slot");
#else
_Static_assert(sizeof(struct reccl_link_event) == 64, "reccl_link_event ABI");
_Static_assert(sizeof(struct reccl_link_key) == 8, "reccl_link_key ABI");
_Static_assert(sizeof(struct reccl_link_resolve_ctx) == 8, "reccl_link_resolve_ctx ABI");
_Static_assert(sizeof(struct reccl_link_slot) == 64, "reccl_link_slot ABI");
_Static_assert(sizeof(struct reccl_retrans_window) == 80, "reccl_retrans_window ABI");
_Static_assert(sizeof(struct reccl_retrans_pooled_window) == 40, "reccl_retrans_pooled_window ABI");
_Static_assert(sizeof(struct reccl_retrans_pool) == 16 + 40 * RECCL_RETRANS_POOL_MAX, "reccl_retrans_pool ABI");
_Static_assert(sizeof(struct reccl_link_counters) == 8 * (4 + RECCL_LINK_SRC_COUNT), "reccl_link_counters ABI");
#endif

#endif
