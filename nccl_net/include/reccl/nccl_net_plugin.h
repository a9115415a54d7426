/* What libnccl-net-reccl.so offers beside NCCL's plugin table (ncclNetPlugin_v8), for tools that
 * load it themselves (a benchmark, a health check): a connection's reccl counters. */
#ifndef RECCL_NCCL_NET_PLUGIN_H_
#define RECCL_NCCL_NET_PLUGIN_H_

#include "reccl/reccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The counters of the reccl communicator under a send or receive comm the plugin returned
 * (stats->size set by the caller, as recclCommGetStats wants). 0 on success; -1 when the comm is
 * NULL, not yet connected or failed. */
int recclNetCommStats(void* comm, recclCommStats_t* stats);
typedef int (*recclNetCommStats_t)(void* comm, recclCommStats_t* stats);

#ifdef __cplusplus
}
#endif

#endif
