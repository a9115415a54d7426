// The part of NCCL's network-plugin ABI this plugin implements: the version-8 function table
// (ncclNetPlugin_v8, loaded by NCCL 2.19 and every release since) and the types it passes.
// Declared here because NCCL installs no header for plugins; every plugin carries its own. The
// layout checks below pin what NCCL reads across the boundary.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// NCCL's result codes, as its public nccl.h numbers them.
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5,
} ncclDebugLogLevel;

// Subsystem flags of a log line (NCCL_DEBUG_SUBSYS): this plugin logs under INIT and NET.
enum : unsigned long { NCCL_INIT = 1, NCCL_NET = 16 };

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);

// What a connection's buffers may be: host memory only here (NCCL then stages device buffers
// through pinned host memory itself).
enum { NCCL_PTR_HOST = 0x1, NCCL_PTR_CUDA = 0x2, NCCL_PTR_DMABUF = 0x4 };

// NCCL hands the listener's handle to the connecting rank through its own bootstrap.
enum { NCCL_NET_HANDLE_MAXSIZE = 128 };
// Requests NCCL keeps in flight on one comm at most.
enum { NCCL_NET_MAX_REQUESTS = 32 };

typedef enum { NCCL_NET_DEVICE_HOST = 0, NCCL_NET_DEVICE_UNPACK = 1 } ncclNetDeviceType;
enum { NCCL_NET_DEVICE_INVALID_VERSION = 0 };

// Device offload (a comm driven from GPU code): not offered, so NCCL never passes one.
typedef struct ncclNetDeviceHandle_v8 ncclNetDeviceHandle_v8_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;  // Mbit/s
  int port;
  float latency;  // us
  int maxComms;
  int maxRecvs;  // receives one irecv may group
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  // connect and accept must not block: they return ncclSuccess with a NULL comm until the
  // connection is made, and NCCL calls them again.
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  // isend and irecv may set *request to NULL: "not now, try again".
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

}  // extern "C"

static_assert(sizeof(ncclResult_t) == 4 && sizeof(ncclNetDeviceType) == 4);
static_assert(offsetof(ncclNetProperties_v8_t, guid) == 16 && offsetof(ncclNetProperties_v8_t, latency) == 40 &&
              offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56 && sizeof(ncclNetProperties_v8_t) == 64);
static_assert(offsetof(ncclNet_v8_t, isend) == 10 * sizeof(void*) &&
              offsetof(ncclNet_v8_t, irecvConsumed) == 18 * sizeof(void*) && sizeof(ncclNet_v8_t) == 19 * sizeof(void*));
