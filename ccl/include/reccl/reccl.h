/* reccl: collective communication that survives last-hop network faults.
 *
 * The C API mirrors NCCL's names and argument order (ncclX -> recclX), so code written for NCCL
 * ports by renaming. With `stream` NULL and host buffers a call returns when the operation has
 * completed on this rank. A CUDA build (docs/cuda.md) also takes a cudaStream_t cast to
 * recclStream_t, with NCCL's semantics (the call enqueues and returns; the collective is ordered
 * on the stream; errors through recclCommGetAsyncError), and device buffers (with a NULL stream:
 * on the legacy default stream, returning when done). No C++ exception ever crosses this
 * boundary. A call that fails once it has started (its deadline, a lost peer) fails its
 * communicator and shuts its connections down at once (the peers learn of it then, not at their
 * deadline), but I/O already under way on that call's buffers (TCP moves large steps straight from
 * and into them) may still end after it returned: reuse or free them only once recclCommAbort or
 * recclCommDestroy has returned, which wait for that I/O.
 *
 * Threads (NCCL's rules, stated):
 * - A communicator is used by one thread at a time: two threads must not call into the same
 *   recclComm_t at once. Different communicators may be used from different threads at once.
 * - Exceptions: recclCommAbort may be called from any thread at any time, also while another
 *   thread is inside a call on the same communicator (that call returns recclAborted; the abort
 *   frees the communicator only once every call inside has left, and returns recclTimeout,
 *   freeing nothing, if one has not 10 s after the abort). The handle must not be used after a
 *   close returned; a call that still reaches it then (one racing the close), or a second close,
 *   is refused with recclInvalidUsage for the last 4096 closed handles. recclCommDestroy beside
 *   a call on another thread waits for that call to end (by its deadline), and a recclCommAbort
 *   meanwhile makes it abort the call instead (that abort returns at once; the destroy aborts). recclCommGetAsyncError,
 *   recclCommCount, recclCommUserRank, recclCommGetStats and recclCommPeerLost may be called
 *   from any thread while another uses the communicator. So may recclCommRevoke and
 *   recclCommShrink with RECCL_SHRINK_ABORT (a watchdog's ways on): the call inside returns an
 *   error; the revoked communicator stays for a shrink, the shrink goes on.
 * - recclGroupStart/recclGroupEnd nest per thread: a group collects the calls of the thread
 *   that opened it.
 * - recclGetLastError reports the last failed call of the calling thread.
 * - recclGetVersion, recclGetErrorString, recclGetUniqueId and the init calls are safe from any
 *   thread; ranks of one communicator may be initialized by threads of one process (as
 *   recclCommInitAll does), each with its own handle.
 * - A non-blocking communicator (recclConfig_t.blocking = 0) takes no collective until
 *   recclCommGetAsyncError reported recclSuccess for it; recclCommDestroy waits for work it
 *   still runs, recclCommAbort does not.
 * - Fork: a child process must not use communicators its parent created. */
#ifndef RECCL_H_
#define RECCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What libreccl.so exports (it is built with hidden visibility). */
#if defined(__GNUC__)
#define RECCL_API __attribute__((visibility("default")))
#else
#define RECCL_API
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
  recclNumOps = 5,
  /* Ops made by recclRedOpCreatePreMulSum take values from recclNumOps up; this one makes the enum
   * as wide as an int for them, as NCCL's ncclMaxRedOp does. */
  recclMaxRedOp = 0x7fffffff
} recclRedOp_t;

/* Where recclRedOpCreatePreMulSum's scalar lives (NCCL's ncclScalarResidence_t). */
typedef enum {
  /* Read from the pointer each time a collective with the op runs (in stream order), so it may
   * change between calls; the memory stays valid until every call that used the op has run (a
   * queued call keeps the pointer even after recclRedOpDestroy). reccl reads it on the host: host,
   * pinned or managed memory; device memory, which NCCL takes, is refused (recclInvalidArgument). */
  recclScalarDevice = 0,
  /* Copied when the op is made; the pointer may go right after. */
  recclScalarHostImmediate = 1
} recclScalarResidence_t;

#define RECCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[RECCL_UNIQUE_ID_BYTES];
} recclUniqueId;

typedef struct recclComm* recclComm_t;
/* Opaque stream handle: NULL means "synchronous on the host". A CUDA build accepts a
 * cudaStream_t cast to recclStream_t; a build without CUDA refuses anything but NULL. */
typedef struct recclStream* recclStream_t;

/* Settings of recclCommInitRankConfig and recclCommSplit, versioned like NCCL's ncclConfig_t:
 * always start from RECCL_CONFIG_INITIALIZER, then set fields. `size`, `magic` and `version`
 * let the library read a struct compiled against an older header (fields are only appended).
 * RECCL_CONFIG_UNDEF_INT leaves a setting to its RECCL_* variable (`reccl params`). */
#define RECCL_CONFIG_UNDEF_INT INT_MIN
#define RECCL_CONFIG_MAGIC 0x7ecc1c0fu
typedef struct {
  size_t size;          /* sizeof(recclConfig_t) */
  unsigned int magic;   /* RECCL_CONFIG_MAGIC */
  unsigned int version; /* RECCL_VERSION_CODE of the header compiled against */
  /* 1 (the default): init returns when the communicator is ready. 0: init checks its
   * arguments, returns recclInProgress and goes on in the background; recclCommGetAsyncError
   * reports recclInProgress until it finished, then its result. recclCommFinalize likewise. */
  int blocking;
  int nChannels;          /* RECCL_NCHANNELS: channels per peer connection, 0..16 (0: one per NIC) */
  int timeoutMs;          /* RECCL_TIMEOUT_MS: a collective's deadline to make progress, >= 1 */
  int bootstrapTimeoutMs; /* RECCL_BOOTSTRAP_TIMEOUT_MS: rendezvous and set-up deadline, >= 1 */
  const char* commName;   /* shown in log lines; NULL: none (copied at init) */
} recclConfig_t;
#define RECCL_CONFIG_INITIALIZER                                                             \
  {                                                                                          \
    sizeof(recclConfig_t), RECCL_CONFIG_MAGIC, RECCL_VERSION_CODE, RECCL_CONFIG_UNDEF_INT,   \
        RECCL_CONFIG_UNDEF_INT, RECCL_CONFIG_UNDEF_INT, RECCL_CONFIG_UNDEF_INT, NULL         \
  }

/* recclCommSplit's color for a rank that joins no new communicator (it gets NULL). */
#define RECCL_SPLIT_NOCOLOR (-1)

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
 * and `size` tells the library how much the caller's struct holds. On return `size` is how many
 * bytes the library filled: the smaller of the caller's size and its own. A field that ends past
 * it (offsetof + sizeof > size) is one the library does not know (older than the header), left
 * as the caller had it. */
typedef struct {
  size_t size; /* set by the caller to sizeof(recclCommStats_t); on return, the bytes filled */
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
  /* lastMigrationFirstStepNs and lastMigrationResumeNs again, counted only over migrations away
   * from a fault (link down, socket error, stall, degraded link), not fail-backs or rebalances:
   * a fail-back soon after the fault, before the caller reads the stats, leaves these to the
   * failover. */
  uint64_t lastFaultMoveFirstStepNs;
  uint64_t lastFaultMoveResumeNs;
  /* Connections lost for good (a peer that died or destroyed its communicator, one with no path
   * left), counted as they fail, also while no call runs (no async error then, as in NCCL: a
   * later call that needs one fails with its error). Not connections a failed call, a mismatch
   * or an abort ended. firstLostPeer: the peer of the first (-1: none); recclCommPeerLost. */
  uint64_t lostConnections;
  int32_t firstLostPeer;
} recclCommStats_t;

RECCL_API recclResult_t recclGetVersion(int* version);
RECCL_API const char* recclGetErrorString(recclResult_t result);
/* "none", "in-band", "nic-poll", "rtnetlink", "bpf", "daemon"; "unknown" otherwise. */
RECCL_API const char* recclGetFaultSourceString(recclFaultSource_t source);
/* Human-readable text of the last error on this thread ("" when none). */
RECCL_API const char* recclGetLastError(recclComm_t comm);

/* Starts a rendezvous in this process and describes it in uniqueId: hand the id to every rank
 * (any process, any host that reaches this one, e.g. through MPI_Bcast), each of which calls
 * recclCommInitRank with it. The id carries a random key: whoever holds it may join. It serves
 * one communicator, and until RECCL_BOOTSTRAP_TIMEOUT_MS passed. */
RECCL_API recclResult_t recclGetUniqueId(recclUniqueId* uniqueId);
/* Joins the communicator of uniqueId as `rank` of `nranks`; returns when every rank joined. */
RECCL_API recclResult_t recclCommInitRank(recclComm_t* comm, int nranks, recclUniqueId commId, int rank);
/* recclCommInitRank with settings (NULL: the defaults); config->blocking = 0 makes it
 * non-blocking (recclInProgress; see recclConfig_t). */
RECCL_API recclResult_t recclCommInitRankConfig(recclComm_t* comm, int nranks, recclUniqueId commId, int rank,
                                      recclConfig_t* config);
/* recclCommInitRankConfig with the bootstrap spread over nId roots (NCCL's
 * ncclCommInitRankScalable): commIds holds nId unique ids, each from recclGetUniqueId on its own
 * rank (spread them over the hosts), broadcast to every rank in the same order. Root i serves ranks
 * [i * nranks / nId, (i + 1) * nranks / nId); only the first rank of each other block reaches root
 * 0, so no root holds a connection per rank or sends the rank table to every rank. nId = 1 is
 * recclCommInitRankConfig. 1 <= nId <= nranks (and 1024). */
RECCL_API recclResult_t recclCommInitRankScalable(recclComm_t* comm, int nranks, int rank, int nId,
                                                 recclUniqueId* commIds, recclConfig_t* config);
/* Initializes from the launcher's environment, with no address to set by hand where the
 * launcher knows one: torchrun (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT), Slurm's srun
 * (SLURM_PROCID/SLURM_NTASKS; the step's first node and a port from the job and step ids),
 * Open MPI's mpirun and other PMIx launchers (OMPI_COMM_WORLD_*; rank 0's address shared through
 * PMIx), PMI_*. RECCL_COMM_ID=host:port or MASTER_ADDR/MASTER_PORT override the address. A
 * setting that is missing is recclInvalidUsage with a message naming what to set. */
RECCL_API recclResult_t recclCommInitFromEnv(recclComm_t* comm);
/* Creates ndev communicators in this process (one per rank, ranks as threads): for tests.
 * devlist: NULL, or the CUDA device of each rank (made current on its thread before its init;
 * recclCommCuDevice; a device that cannot be made current fails the call); a build without CUDA
 * takes only NULL. */
RECCL_API recclResult_t recclCommInitAll(recclComm_t* comms, int ndev, const int* devlist);
/* Splits comm (collective over all its ranks): ranks that pass one color form a new
 * communicator, ordered by key, then by rank in comm. RECCL_SPLIT_NOCOLOR: *newcomm = NULL.
 * config NULL: the child has comm's settings. The exchange over comm blocks; the child's init
 * follows config->blocking. On a revoked comm (recclCommRevoke), whose connections are failed,
 * the ranks first join a communicator of all comm's ranks through recclCommShrink's handover
 * (lowest rank to each listener) and exchange over that one, closed before the call returns;
 * every rank of comm must call it then too (a dead one: recclCommShrink). */
RECCL_API recclResult_t recclCommSplit(recclComm_t comm, int color, int key, recclComm_t* newcomm, recclConfig_t* config);
/* recclCommShrink's flags (NCCL's NCCL_SHRINK_*): DEFAULT leaves comm as it is; ABORT first
 * aborts comm's operations in flight (their calls return with an error, and comm takes no more
 * work) — after a rank's death, where comm's collectives would wait for it. */
#define RECCL_SHRINK_DEFAULT 0x00
#define RECCL_SHRINK_ABORT 0x01
/* A new communicator of comm's ranks but those in excludeRanksList, in comm's rank order (the
 * gaps closed), NCCL's ncclCommShrink: every rank not excluded calls it with the same list; the
 * excluded ranks do not (they may be dead; recclCommPeerLost tells which this rank lost). Needs
 * no collective over comm: the lowest rank left starts the new rendezvous and hands it to each
 * of the others on a connection of its own to their listeners, so it runs on a comm that a dead
 * rank broke. Ranks that pass different lists fail (recclInvalidUsage naming it, or the
 * rendezvous's timeout). config NULL: comm's settings. A blocking config waits for the handover
 * (up to the bootstrap timeout) and the child's init; a non-blocking one checks the arguments,
 * returns recclInProgress with *newcomm set, and runs both on the child's init thread, whose
 * result (a disagreeing list included) recclCommGetAsyncError(*newcomm) reports, as NCCL's
 * non-blocking shrink does. An abort of comm or of the child ends the handover at once; a
 * destroy of comm waits for it (as for any call inside comm), so comm may be destroyed as soon as
 * a non-blocking shrink returned. */
RECCL_API recclResult_t recclCommShrink(recclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                              recclComm_t* newcomm, recclConfig_t* config, int shrinkFlags);
/* recclCommRevoke's flags (NCCL's NCCL_REVOKE_*): only DEFAULT. */
#define RECCL_REVOKE_DEFAULT 0x00
/* NCCL's ncclCommRevoke: stops comm's operations in flight (their calls return an error:
 * recclAborted, "communicator revoked", where comm had not failed before; stream work stops) and
 * takes no more work, without freeing comm. recclCommGetAsyncError then reports recclInProgress
 * until comm is quiet (no other call inside it, no stream work queued), then recclSuccess, as
 * NCCL's does. What may follow: recclCommShrink (either flag: its handover needs none of comm's
 * connections), recclCommSplit (over the same handover), recclCommDestroy, recclCommAbort, and the
 * inspecting calls (async error, count, rank, stats, peer lost, recclRedOpDestroy); anything
 * else, recclCommFinalize included, is refused with recclInvalidUsage. Local: each
 * rank revokes its own comm (its connections fail: a peer's call waiting on one of them fails,
 * one waiting on another rank needs its own revoke). From any thread at any time, as
 * recclCommAbort (a watchdog's way to end a collective that waits for a dead rank); a second
 * revoke returns recclSuccess; refused while a non-blocking init or finalize runs, and after a
 * finalize (recclInvalidUsage) or a failed init (its error). revokeFlags: RECCL_REVOKE_DEFAULT. */
RECCL_API recclResult_t recclCommRevoke(recclComm_t comm, int revokeFlags);
/* Waits until every rank of comm finalized it (so all work on it is done everywhere), then
 * takes no more work; recclCommDestroy follows. Collective. Non-blocking communicators return
 * recclInProgress and report the end through recclCommGetAsyncError. */
RECCL_API recclResult_t recclCommFinalize(recclComm_t comm);
/* Releases comm, after a non-blocking init or finalize it still runs ends (up to its deadline:
 * past that it is aborted, the handle released all the same, and the result is recclTimeout), and
 * after calls other threads still have inside it returned (up to the same bound, then aborted:
 * recclTimeout; one still inside 10 s after that leaves the handle closed but not freed). */
RECCL_API recclResult_t recclCommDestroy(recclComm_t comm);
/* Stops all work on comm and releases it once the calls inside it (on other threads) returned,
 * which they do at once; safe from any thread. Waits at most 10 s for an interrupted finalize and
 * 10 s for the calls (then recclTimeout, nothing freed). */
RECCL_API recclResult_t recclCommAbort(recclComm_t comm);
/* The communicator's first fatal error (recclSuccess if none); recclInProgress while a
 * non-blocking init or finalize still runs. Revoked: recclInProgress until quiet, then
 * recclSuccess (recclCommRevoke). */
RECCL_API recclResult_t recclCommGetAsyncError(recclComm_t comm, recclResult_t* asyncError);
RECCL_API recclResult_t recclCommCount(const recclComm_t comm, int* count);
RECCL_API recclResult_t recclCommUserRank(const recclComm_t comm, int* rank);
RECCL_API recclResult_t recclCommGetStats(const recclComm_t comm, recclCommStats_t* stats);
/* *lost = 1 when this rank's connections to `peer` were lost for good (recclCommStats_t's
 * lostConnections), else 0. From any thread, as recclCommGetStats: a watchdog's way to tell
 * which peer went while the communicator was idle. */
RECCL_API recclResult_t recclCommPeerLost(const recclComm_t comm, int peer, int* lost);
/* The CUDA device comm was made on: the one current on the thread that called the init (a
 * split's or shrink's children keep their parent's, or where it had none take the one current
 * at the split; recclCommInitAll: devlist[i]). What it reports; device collectives run on the
 * device of the first stream (or device buffer) a communicator is given, and a later one on
 * another device is refused (docs/cuda.md). recclInvalidUsage for a communicator made with no
 * CUDA device current (its ranks run on the host) and in a build without CUDA. */
RECCL_API recclResult_t recclCommCuDevice(const recclComm_t comm, int* device);

/* Registers [buff, buff + size) with comm (NCCL's ncclCommRegister); *handle names the
 * registration for recclCommDeregister. No transport of reccl needs one to move a buffer (TCP
 * moves large steps straight from and into it and copies the rest through its slots; verbs and
 * the CUDA path stage through slots registered when a connection is made), so a registration
 * changes nothing about how data moves: code written for NCCL's registration runs unchanged, and
 * a wrong handle is refused, not ignored. A range may be registered more than once (a handle
 * each) and overlap others. Registrations still live when comm is destroyed or aborted go with
 * it. */
RECCL_API recclResult_t recclCommRegister(const recclComm_t comm, void* buff, size_t size, void** handle);
/* Ends a registration made on comm, in any state comm is in until it is closed;
 * recclInvalidArgument for a handle that is not live on comm (ended already, or another
 * communicator's). */
RECCL_API recclResult_t recclCommDeregister(const recclComm_t comm, void* handle);
/* Windows (NCCL's ncclCommWindowRegister): a registration every rank of comm makes in one call.
 * Flags: DEFAULT, or COLL_SYMMETRIC, with which the caller promises that every collective on the
 * window uses the same offset into it on every rank. REQUIRED_ALIGNMENT is NCCL's figure for
 * symmetric buffers, kept for code that rounds to it. */
typedef struct recclWindow* recclWindow_t;
#define RECCL_WIN_DEFAULT 0x00
#define RECCL_WIN_COLL_SYMMETRIC 0x01
#define RECCL_WIN_REQUIRED_ALIGNMENT 4096
/* Collective over comm: every rank registers [buff, buff + size) with the same winFlags and the
 * same size (NCCL's default rule), and the ranks agree over comm's connections before any keeps
 * it: a rank that differs (or cannot take another window) is named by recclInvalidUsage on every
 * rank, and no rank keeps the window. Arguments wrong in themselves (null pointers, size 0,
 * unknown flags) are refused at once, as a collective's are. *win names the window for
 * recclCommWindowDeregister. Blocking, outside a group (recclInvalidUsage inside one). Like a
 * registration, a window changes nothing about how data moves (no transport of reccl needs one);
 * windows still live when comm is closed go with it. */
RECCL_API recclResult_t recclCommWindowRegister(recclComm_t comm, void* buff, size_t size, recclWindow_t* win,
                                                int winFlags);
/* Collective over comm: every rank ends the same window (windows count in the order comm
 * registered them; a rank that ends another one is named, and none ends it). On a communicator
 * that can take no more work (failed, revoked, finalized) it ends this rank's window alone.
 * recclInvalidArgument for a window that is not live on comm. */
RECCL_API recclResult_t recclCommWindowDeregister(recclComm_t comm, recclWindow_t win);
/* size bytes of device memory on the calling thread's current device (NCCL's ncclMemAlloc;
 * cudaMalloc here), for buffers; free it with recclMemFree. recclUnhandledCudaError naming why
 * where the process has no usable device; recclInvalidUsage in a build without CUDA. */
RECCL_API recclResult_t recclMemAlloc(void** ptr, size_t size);
/* Frees memory recclMemAlloc returned (NULL: nothing, recclSuccess). Any other pointer is
 * refused with recclInvalidArgument and left alone. */
RECCL_API recclResult_t recclMemFree(void* ptr);

RECCL_API recclResult_t recclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             recclDataType_t datatype, recclRedOp_t op, recclComm_t comm,
                             recclStream_t stream);
RECCL_API recclResult_t recclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             recclDataType_t datatype, int root, recclComm_t comm,
                             recclStream_t stream);
/* In place: recclBroadcast(buff, buff, ...), as NCCL's legacy ncclBcast. */
RECCL_API recclResult_t recclBcast(void* buff, size_t count, recclDataType_t datatype, int root, recclComm_t comm,
                         recclStream_t stream);
RECCL_API recclResult_t recclReduce(const void* sendbuff, void* recvbuff, size_t count,
                          recclDataType_t datatype, recclRedOp_t op, int root, recclComm_t comm,
                          recclStream_t stream);
/* sendcount elements per rank; recvbuff holds nranks * sendcount. */
RECCL_API recclResult_t recclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             recclDataType_t datatype, recclComm_t comm, recclStream_t stream);
/* recvcount elements per rank; sendbuff holds nranks * recvcount. */
RECCL_API recclResult_t recclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 recclDataType_t datatype, recclRedOp_t op, recclComm_t comm,
                                 recclStream_t stream);
/* count elements to each peer; both buffers hold nranks * count. NCCL's ncclAlltoAll. */
RECCL_API recclResult_t recclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                            recclDataType_t datatype, recclComm_t comm, recclStream_t stream);
/* count elements from every rank to root, rank i's at recvbuff + i * count (recvbuff is read only
 * at root). In place where sendbuff == recvbuff + root * count at root. NCCL's ncclGather: one
 * group of sends and receives, so in a group it joins the group's other sends and receives. */
RECCL_API recclResult_t recclGather(const void* sendbuff, void* recvbuff, size_t count,
                          recclDataType_t datatype, int root, recclComm_t comm, recclStream_t stream);
/* count elements from root's sendbuff + i * count to rank i's recvbuff (sendbuff is read only at
 * root). In place where recvbuff == sendbuff + root * count at root. NCCL's ncclScatter, run as
 * recclGather is. */
RECCL_API recclResult_t recclScatter(const void* sendbuff, void* recvbuff, size_t count,
                           recclDataType_t datatype, int root, recclComm_t comm, recclStream_t stream);
/* The earlier spelling of recclAlltoAll, kept for programs written against it. */
RECCL_API recclResult_t recclAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                            recclDataType_t datatype, recclComm_t comm, recclStream_t stream);
RECCL_API recclResult_t recclSend(const void* sendbuff, size_t count, recclDataType_t datatype, int peer,
                        recclComm_t comm, recclStream_t stream);
RECCL_API recclResult_t recclRecv(void* recvbuff, size_t count, recclDataType_t datatype, int peer,
                        recclComm_t comm, recclStream_t stream);
RECCL_API recclResult_t recclBarrier(recclComm_t comm, recclStream_t stream);

/* A reduction op for this communicator's allreduce, reduce and reduce-scatter of `datatype`: each
 * rank's input is multiplied by that rank's own `scalar` (one element of `datatype`), then summed
 * (NCCL's ncclRedOpCreatePreMulSum; e.g. a gradient average with the division first). Integers
 * wrap; half and bfloat16 multiply in float and round once. Only calls of `datatype` on `comm`
 * take it (recclInvalidArgument otherwise). Ranks may make their ops in any order and hold
 * different scalars; all ranks of a collective must use PreMulSum ops (the op is checked like any
 * other). */
RECCL_API recclResult_t recclRedOpCreatePreMulSum(recclRedOp_t* op, void* scalar, recclDataType_t datatype,
                                                  recclScalarResidence_t residence, recclComm_t comm);
/* Frees an op of recclRedOpCreatePreMulSum at once; its value may be handed out again. Calls
 * already queued with it (a group, a stream) keep its scalar (see recclScalarDevice). Built-in
 * ops are refused (recclInvalidArgument). */
RECCL_API recclResult_t recclRedOpDestroy(recclRedOp_t op, recclComm_t comm);

/* Between GroupStart and GroupEnd the thread's calls are queued (each still checks its arguments
 * at once); the outermost GroupEnd runs them: each communicator's collectives in call order, then
 * all its sends and receives together (deadlock-free), and the group's communicators at once, so
 * one thread may drive several (recclCommInitAll's). GroupEnd returns the first failure. Destroying
 * or aborting a communicator (on any thread) with calls queued in an open group drops them, and
 * that group's GroupEnd fails (recclInvalidUsage). A thread that ends inside a group drops its
 * calls, as NCCL does, with a warning. */
RECCL_API recclResult_t recclGroupStart(void);
RECCL_API recclResult_t recclGroupEnd(void);
/* recclGroupSimulateEnd's answer (NCCL's ncclSimInfo_t): start from RECCL_SIM_INFO_INITIALIZER. */
#define RECCL_SIM_INFO_MAGIC 0x74685283u
typedef struct {
  size_t size;          /* sizeof(recclSimInfo_t) */
  unsigned int magic;   /* RECCL_SIM_INFO_MAGIC */
  unsigned int version; /* RECCL_VERSION_CODE of the header compiled against */
  float estimatedTime;  /* set by the call: microseconds */
} recclSimInfo_t;
#define RECCL_SIM_INFO_INITIALIZER \
  { sizeof(recclSimInfo_t), RECCL_SIM_INFO_MAGIC, RECCL_VERSION_CODE, -1.0f }
/* Ends the group as recclGroupEnd does (an inner one: only the nesting) but runs none of its
 * operations: they are dropped, on every rank that simulates (a rank that ends the same group
 * with recclGroupEnd waits for the others until its deadline). simInfo->estimatedTime: how long
 * the group would take, in microseconds: each communicator's operations one after another, the
 * communicators at once. The price of an operation is learned from the communicator's own host
 * calls that succeeded (a fit of seconds per hop and per byte over the recent ones; before any,
 * a first guess of 50 us a hop and 1 GB/s), applied to the hops and bytes of the algorithm that
 * would run it (docs/collectives.md, "Simulating a group"). recclInvalidArgument for a simInfo
 * not set from RECCL_SIM_INFO_INITIALIZER (the group stays open), recclInvalidUsage without a
 * recclGroupStart. */
RECCL_API recclResult_t recclGroupSimulateEnd(recclSimInfo_t* simInfo);

#ifdef __cplusplus
}
#endif

#endif /* RECCL_H_ */
