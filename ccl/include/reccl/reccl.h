/* reccl: collective communication that survives last-hop network faults.
 *
 * The C API mirrors NCCL's names and argument order (ncclX -> recclX), so code written for NCCL
 * ports by renaming. With `stream` NULL and host buffers a call returns when the operation has
 * completed on this rank. A CUDA build (docs/cuda.md) also takes a cudaStream_t cast to
 * recclStream_t, with NCCL's semantics (the call enqueues and returns; the collective is ordered
 * on the stream; errors through recclCommGetAsyncError), and device buffers (with a NULL stream:
 * on the legacy default stream, returning when done). No C++ exception ever crosses this
 * boundary. */
#ifndef RECCL_H_
#define RECCL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RECCL_MAJOR 0
#define RECCL_MINOR 1
#define RECCL_PATCH 0
#define RECCL_VERSION_CODE (RECCL_MAJOR * 10000 + RECCL_MINOR * 100 + RECCL_PATCH)

typedef enum {
  recclSuccess = 0,
  recclUnhandledCudaError = 1,
  recclSystemError = 2,      /* a syscall failed; recclGetLastError has the errno text */
  recclInternalError = 3,    /* a bug in reccl */
  recclInvalidArgument = 4,  /* an argument is wrong; the message names it */
  recclInvalidUsage = 5,     /* calls in the wrong order, mismatched collectives across ranks */
  recclRemoteError = 6,      /* a peer process failed or sent something malformed */
  recclInProgress = 7,       /* non-blocking init or abort still running */
  recclTimeout = 8,          /* a deadline (RECCL_TIMEOUT_MS, RECCL_BOOTSTRAP_TIMEOUT_MS) passed */
  recclNetworkError = 9,     /* a network fault that failover could not route around */
  recclAborted = 10,         /* the communicator was aborted */
  recclNumResults = 11
} recclResult_t;

typedef enum {
  recclInt8 = 0, recclChar = 0,
  recclUint8 = 1,
  recclInt32 = 2, recclInt = 2,
  recclUint32 = 3,
  recclInt64 = 4,
  recclUint64 = 5,
  recclFloat16 = 6, recclHalf = 6,
  recclFloat32 = 7, recclFloat = 7,
  recclFloat64 = 8, recclDouble = 8,
  recclBfloat16 = 9,
  recclNumTypes = 10
} recclDataType_t;

typedef enum {
  recclSum = 0,
  recclProd = 1,
  recclMax = 2,
  recclMin = 3,
  recclAvg = 4,
  recclNumOps = 5
} recclRedOp_t;

#define RECCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[RECCL_UNIQUE_ID_BYTES];
} recclUniqueId;

typedef struct recclComm* recclComm_t;
/* Opaque stream handle: NULL means "synchronous on the host". A CUDA build accepts a
 * cudaStream_t cast to recclStream_t; a build without CUDA refuses anything but NULL. */
typedef struct recclStream* recclStream_t;

/* The link-fault source a communicator's monitor uses now (recclCommStats_t.faultSource).
 * Socket errors and the stall check run besides every one of them. */
typedef enum {
  recclFaultSourceNone = 0,      /* no failover machinery (RECCL_FAILOVER=0) */
  recclFaultSourceInBand = 1,    /* socket errors and the stall check only */
  recclFaultSourceNicPoll = 2,   /* the NICs' IFF_UP|IFF_RUNNING polled */
  recclFaultSourceRtnetlink = 3, /* the in-process detector on rtnetlink */
  recclFaultSourceBpf = 4,       /* the in-process detector with BPF hooks */
  recclFaultSourceDaemon = 5,    /* the node daemon reccl-detectord */
  recclNumFaultSources = 6
} recclFaultSource_t;

#define RECCL_FAULT_SOURCE_NAME_BYTES 60

/* Per-communicator counters, filled by recclCommGetStats. Append-only: new fields go at the end
 * and `size` tells the library how much the caller's struct holds. */
typedef struct {
  size_t size; /* set by the caller to sizeof(recclCommStats_t) */
  uint64_t collectives;
  uint64_t bytesSent;
  uint64_t bytesReceived;
  uint64_t failovers;         /* channel migrations to another path */
  uint64_t failbacks;         /* channel migrations back to a recovered rail */
  uint64_t bytesResent;       /* payload resent from sender slots after a migration */
  uint64_t duplicateSteps;    /* steps received twice and dropped (exactly-once guard) */
  uint64_t lastFailoverUs;    /* detection-to-first-step time of the latest failover */
  uint32_t railsUp;
  uint32_t railsTotal;
  /* CLOCK_MONOTONIC ns (0: none yet), for lining up failovers with a fault timeline: the first
   * signal of the latest failover this rank initiated, and the moment the latest migrated
   * connection (either end, any reason) completed its first step on its new path. */
  uint64_t lastFailoverSignalNs;
  uint64_t lastMigrationFirstStepNs;
  uint64_t relayMigrations;     /* migrations of this rank's connections onto a same-host relay */
  uint64_t relayBytesForwarded; /* bytes this rank forwarded as relay for same-host ranks */
  uint64_t relayPipesServed;    /* relayed connections this rank has served */
  uint64_t standbyFailovers;    /* failovers this rank initiated over a pre-connected standby path */
  uint32_t faultSource;         /* recclFaultSource_t in use now */
  /* The same with detail, NUL-terminated: "daemon:rawtp_linkwatch,tp_qdisc_reset",
   * "bpf:rawtp_linkwatch,...", "rtnetlink", "nic-poll", "in-band", "none". */
  char faultSourceName[RECCL_FAULT_SOURCE_NAME_BYTES];
  /* 1 while a better fault source is still starting in the background (the in-process detector
   * probing and loading its BPF programs, ~0.3 s of CPU after init; faultSource is the NIC poll
   * meanwhile), 0 once it runs or has given up. Benchmarks wait for 0 before they time. */
  uint32_t faultSourceStarting;
  /* CLOCK_MONOTONIC ns (0: none yet): when the work the latest migration held up moved again,
   * the latest over this rank's migrated senders. A sender with steps outstanding when its new
   * path started counts its first acknowledgement over that path (as lastMigrationFirstStepNs
   * does); one with nothing outstanding counts the start itself, so an idle connection is not
   * charged for the time until the application's next call. Where a failover's stall ends. */
  uint64_t lastMigrationResumeNs;
} recclCommStats_t;

recclResult_t recclGetVersion(int* version);
const char* recclGetErrorString(recclResult_t result);
/* "none", "in-band", "nic-poll", "rtnetlink", "bpf", "daemon"; "unknown" otherwise. */
const char* recclGetFaultSourceString(recclFaultSource_t source);
/* Human-readable text of the last error on this thread ("" when none). */
const char* recclGetLastError(recclComm_t comm);

recclResult_t recclGetUniqueId(recclUniqueId* uniqueId);
recclResult_t recclCommInitRank(recclComm_t* comm, int nranks, recclUniqueId commId, int rank);
/* Initializes from the launcher's environment: RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT
 * (torchrun), OMPI_COMM_WORLD_*, PMI_*, SLURM_*. */
recclResult_t recclCommInitFromEnv(recclComm_t* comm);
/* Creates ndev communicators in this process (one per rank, ranks as threads): for tests. */
recclResult_t recclCommInitAll(recclComm_t* comms, int ndev, const int* devlist);
recclResult_t recclCommDestroy(recclComm_t comm);
/* Stops all work on comm, releases it and returns promptly; safe from any thread. */
recclResult_t recclCommAbort(recclComm_t comm);
recclResult_t recclCommGetAsyncError(recclComm_t comm, recclResult_t* asyncError);
recclResult_t recclCommCount(const recclComm_t comm, int* count);
recclResult_t recclCommUserRank(const recclComm_t comm, int* rank);
recclResult_t recclCommGetStats(const recclComm_t comm, recclCommStats_t* stats);

recclResult_t recclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             recclDataType_t datatype, recclRedOp_t op, recclComm_t comm,
                             recclStream_t stream);
recclResult_t recclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             recclDataType_t datatype, int root, recclComm_t comm,
                             recclStream_t stream);
recclResult_t recclReduce(const void* sendbuff, void* recvbuff, size_t count,
                          recclDataType_t datatype, recclRedOp_t op, int root, recclComm_t comm,
                          recclStream_t stream);
/* sendcount elements per rank; recvbuff holds nranks * sendcount. */
recclResult_t recclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             recclDataType_t datatype, recclComm_t comm, recclStream_t stream);
/* recvcount elements per rank; sendbuff holds nranks * recvcount. */
recclResult_t recclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 recclDataType_t datatype, recclRedOp_t op, recclComm_t comm,
                                 recclStream_t stream);
/* count elements to each peer; both buffers hold nranks * count. */
recclResult_t recclAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                            recclDataType_t datatype, recclComm_t comm, recclStream_t stream);
recclResult_t recclSend(const void* sendbuff, size_t count, recclDataType_t datatype, int peer,
                        recclComm_t comm, recclStream_t stream);
recclResult_t recclRecv(void* recvbuff, size_t count, recclDataType_t datatype, int peer,
                        recclComm_t comm, recclStream_t stream);
recclResult_t recclBarrier(recclComm_t comm, recclStream_t stream);

/* Sends and receives between GroupStart and GroupEnd are issued together (deadlock-free). */
recclResult_t recclGroupStart(void);
recclResult_t recclGroupEnd(void);

#ifdef __cplusplus
}
#endif

#endif /* RECCL_H_ */
