// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Gray-failure injector: a tc clsact program (one entry per direction) that drops packets with a
 * probability, black-holes a direction or drops one flow. Rules live in an array map that
 * userspace rewrites while the program runs, so a rate changes without a reload. Counters are
 * per CPU so the fast path never contends. */
#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "reccl_bpf/fault_drop.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Not dropping returns UNSPEC, not OK, so filters behind ours (other tools' programs) still run. */
#define TC_ACT_UNSPEC (-1)
#define TC_ACT_SHOT 2
#define ETH_P_IP 0x0800
#define ETH_HLEN 14
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, RECCL_FAULT_DROP_MAX_RULES);
  __type(key, __u32);
  __type(value, struct reccl_fault_rule);
} rules SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, RECCL_FAULT_STATS_ENTRIES);
  __type(key, __u32);
  __type(value, struct reccl_fault_stats);
} stats SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct reccl_fault_meta);
} meta SEC(".maps");

struct flow_key {
  __u32 saddr;
  __u32 daddr;
  __u16 sport;
  __u16 dport;
  __u8 proto;
  __u8 is_ipv4;
  __u8 has_ports;
};

static __always_inline void parse_flow(struct __sk_buff *skb, struct flow_key *k)
{
  if (skb->protocol != bpf_htons(ETH_P_IP))
    return;
  struct iphdr ip;
  if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) < 0)
    return;
  if (ip.version != 4 || ip.ihl < 5)
    return;
  k->is_ipv4 = 1;
  k->saddr = ip.saddr;
  k->daddr = ip.daddr;
  k->proto = ip.protocol;
  /* Only the first fragment carries ports; later fragments match port-less rules only. */
  if (ip.frag_off & bpf_htons(IP_OFFSET))
    return;
  if (ip.protocol != IPPROTO_TCP && ip.protocol != IPPROTO_UDP)
    return;
  __u16 ports[2];
  if (bpf_skb_load_bytes(skb, ETH_HLEN + ip.ihl * 4, ports, sizeof(ports)) < 0)
    return;
  k->sport = ports[0];
  k->dport = ports[1];
  k->has_ports = 1;
}

static __always_inline int rule_matches(const struct reccl_fault_rule *r, const struct flow_key *k,
                                        __u32 dir)
{
  if (!r->enabled || !(r->dirs & dir))
    return 0;
  __u32 m = r->match;
  if (!m)
    return 1;
  if (!k->is_ipv4)
    return 0;
  if ((m & RECCL_FAULT_MATCH_PROTO) && r->proto != k->proto)
    return 0;
  if ((m & RECCL_FAULT_MATCH_SADDR) && r->saddr != k->saddr)
    return 0;
  if ((m & RECCL_FAULT_MATCH_DADDR) && r->daddr != k->daddr)
    return 0;
  if (m & (RECCL_FAULT_MATCH_SPORT | RECCL_FAULT_MATCH_DPORT)) {
    if (!k->has_ports)
      return 0;
    if ((m & RECCL_FAULT_MATCH_SPORT) && r->sport != k->sport)
      return 0;
    if ((m & RECCL_FAULT_MATCH_DPORT) && r->dport != k->dport)
      return 0;
  }
  return 1;
}

static __always_inline void count(__u32 key, int dropped)
{
  struct reccl_fault_stats *s = bpf_map_lookup_elem(&stats, &key);
  if (!s)
    return;
  s->seen++;
  if (dropped)
    s->dropped++;
}

static __always_inline int decide(struct __sk_buff *skb, __u32 dir)
{
  struct flow_key k = {};
  parse_flow(skb, &k);
  __u32 all_key = dir == RECCL_FAULT_DIR_INGRESS ? RECCL_FAULT_STATS_INGRESS_ALL
                                                 : RECCL_FAULT_STATS_EGRESS_ALL;
  for (__u32 i = 0; i < RECCL_FAULT_DROP_MAX_RULES; i++) {
    __u32 slot = i;
    struct reccl_fault_rule *r = bpf_map_lookup_elem(&rules, &slot);
    if (!r || !rule_matches(r, &k, dir))
      continue;
    int drop = (__u64)bpf_get_prandom_u32() < r->threshold;
    count(slot, drop);
    count(all_key, drop);
    return drop ? TC_ACT_SHOT : TC_ACT_UNSPEC;
  }
  count(all_key, 0);
  return TC_ACT_UNSPEC;
}

SEC("tc")
int fault_drop_ingress(struct __sk_buff *skb)
{
  return decide(skb, RECCL_FAULT_DIR_INGRESS);
}

SEC("tc")
int fault_drop_egress(struct __sk_buff *skb)
{
  return decide(skb, RECCL_FAULT_DIR_EGRESS);
}
