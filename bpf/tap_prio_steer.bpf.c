// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The testbed's model of a NIC's priority queues, for its tap NICs: a tun steering program
 * (TUNSETSTEERINGEBPF, a socket filter whose return value is the transmit queue) that puts
 * frames whose socket priority is at least TC_PRIO_INTERACTIVE on queue 1, the rest on queue 0.
 * The tap forwarder serves queue 1 first, as a NIC serves a strict-priority traffic class that
 * mqprio maps those priorities to, or as pfifo_fast dequeues its first band. A tap's transmit
 * ring is a FIFO with no backpressure into the qdisc (tun orphans and tail-drops), so without
 * this a priority the host sets could never act on a tap. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define TC_PRIO_INTERACTIVE 6

SEC("socket")
int tap_prio_steer(struct __sk_buff *skb)
{
  return skb->priority >= TC_PRIO_INTERACTIVE ? 1 : 0;
}
