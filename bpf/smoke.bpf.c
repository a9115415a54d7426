// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Smallest end-to-end proof of the BPF build path: a raw tracepoint on sys_enter that reports
 * one process's getppid() calls through a ring buffer. Raw tracepoints need neither tracefs nor
 * BPF trampolines, so this loads on every kernel reccl supports. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "reccl_bpf/smoke.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 target_tgid = 0;
const volatile long target_syscall_nr = -1;

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 64 * 1024);
} events SEC(".maps");

SEC("raw_tracepoint/sys_enter")
int smoke_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
  long nr = (long)ctx->args[1];
  if (nr != target_syscall_nr)
    return 0;
  __u64 id = bpf_get_current_pid_tgid();
  if ((__u32)(id >> 32) != target_tgid)
    return 0;

  struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
  struct reccl_smoke_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e)
    return 0;
  e->tgid = id >> 32;
  e->tid = (__u32)id;
  e->ts_ns = bpf_ktime_get_ns();
  e->cookie = PT_REGS_PARM1_CORE_SYSCALL(regs);
  bpf_ringbuf_submit(e, 0);
  return 0;
}
