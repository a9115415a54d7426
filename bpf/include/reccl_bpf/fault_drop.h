/* ABI between bpf/fault_drop.bpf.c (a tc clsact program that drops packets on purpose) and the
 * userspace that configures it live (tools/inject). One header, both sides. */
#ifndef RECCL_BPF_FAULT_DROP_H
#define RECCL_BPF_FAULT_DROP_H

#ifdef __cplusplus
#include <cstdint>
typedef uint8_t reccl_fd_u8;
typedef uint16_t reccl_fd_u16;
typedef uint32_t reccl_fd_u32;
typedef uint64_t reccl_fd_u64;
#else
typedef __u8 reccl_fd_u8;
typedef __u16 reccl_fd_u16;
typedef __u32 reccl_fd_u32;
typedef __u64 reccl_fd_u64;
#endif

#define RECCL_FAULT_DROP_ABI_VERSION 1
/* Rules are evaluated in slot order; the first enabled rule whose direction and flow match a
 * packet decides its fate. A small fixed table keeps the program's loop bounded. */
#define RECCL_FAULT_DROP_MAX_RULES 8

/* Directions, as seen from the device the program is attached to. */
#define RECCL_FAULT_DIR_INGRESS 0x1u
#define RECCL_FAULT_DIR_EGRESS 0x2u

/* Which fields of the flow match are set; an unset field matches anything (a wildcard). */
#define RECCL_FAULT_MATCH_PROTO 0x1u
#define RECCL_FAULT_MATCH_SADDR 0x2u
#define RECCL_FAULT_MATCH_DADDR 0x4u
#define RECCL_FAULT_MATCH_SPORT 0x8u
#define RECCL_FAULT_MATCH_DPORT 0x10u

/* A packet is dropped when bpf_get_prandom_u32() < threshold, so threshold = rate * 2^32
 * (2^32 = always, 0 = never); u64 so that rate 1.0 is exact. */
#define RECCL_FAULT_THRESHOLD_ALWAYS (1ull << 32)

/* Value of the `rules` array map (key: slot 0..MAX_RULES-1). Addresses and ports are kept in
 * network byte order, as they appear in the packet. */
struct reccl_fault_rule {
  reccl_fd_u32 enabled;   /* 0: slot free */
  reccl_fd_u32 dirs;      /* RECCL_FAULT_DIR_* mask */
  reccl_fd_u64 threshold; /* see RECCL_FAULT_THRESHOLD_ALWAYS */
  reccl_fd_u32 match;     /* RECCL_FAULT_MATCH_* mask */
  reccl_fd_u32 saddr;     /* IPv4, network order */
  reccl_fd_u32 daddr;     /* IPv4, network order */
  reccl_fd_u16 sport;     /* network order */
  reccl_fd_u16 dport;     /* network order */
  reccl_fd_u8 proto;      /* IPPROTO_* */
  reccl_fd_u8 pad[7];
};

/* Value of the per-CPU `stats` array map. Keys 0..MAX_RULES-1 count per rule (packets that
 * matched the rule, packets it dropped); keys MAX_RULES + 0 (ingress) and MAX_RULES + 1 (egress)
 * count every packet the program saw in that direction, so a test can cross-check a receiver. */
#define RECCL_FAULT_STATS_INGRESS_ALL (RECCL_FAULT_DROP_MAX_RULES + 0)
#define RECCL_FAULT_STATS_EGRESS_ALL (RECCL_FAULT_DROP_MAX_RULES + 1)
#define RECCL_FAULT_STATS_ENTRIES (RECCL_FAULT_DROP_MAX_RULES + 2)

struct reccl_fault_stats {
  reccl_fd_u64 seen;
  reccl_fd_u64 dropped;
};

/* Value of the one-entry `meta` array map: facts a later process needs to undo the attachment. */
struct reccl_fault_meta {
  reccl_fd_u32 abi_version;
  reccl_fd_u32 created_qdisc; /* 1 when the clsact qdisc was created by the injector */
};

#ifdef __cplusplus
static_assert(sizeof(reccl_fault_rule) == 40, "fault rule ABI");
static_assert(sizeof(reccl_fault_stats) == 16, "fault stats ABI");
static_assert(sizeof(reccl_fault_meta) == 8, "fault meta ABI");
#else
_Static_assert(sizeof(struct reccl_fault_rule) == 40, "fault rule ABI");
_Static_assert(sizeof(struct reccl_fault_stats) == 16, "fault stats ABI");
_Static_assert(sizeof(struct reccl_fault_meta) == 8, "fault meta ABI");
#endif

#endif
