/* Event of the BPF build-path smoke program (bpf/smoke.bpf.c), shared with userspace. */
#ifndef RECCL_BPF_SMOKE_H
#define RECCL_BPF_SMOKE_H

#ifdef __cplusplus
#include <cstdint>
typedef uint32_t reccl_u32;
typedef uint64_t reccl_u64;
#else
typedef __u32 reccl_u32;
typedef __u64 reccl_u64;
#endif

struct reccl_smoke_event {
  reccl_u32 tgid;
  reccl_u32 tid;
  reccl_u64 ts_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
  reccl_u64 cookie; /* first syscall argument, echoed so the test knows the event is its own */
};

#ifdef __cplusplus
static_assert(sizeof(reccl_smoke_event) == 24, "smoke event ABI");
#else
_Static_assert(sizeof(struct reccl_smoke_event) == 24, "smoke event ABI");
#endif

#endif
