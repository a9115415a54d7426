// A rank of the CUDA stream tests (cuda_device_test) and of the device rail pull
// (cuda_railpull_test): collectives on device buffers and CUDA streams through the public API
// (libreccl.so, as an application links it, with this program's own CUDA runtime beside the
// library's), every result checked bit for bit with reccl-bench's closed forms (bench_data.h).
//
// Env: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (or reccl testbed run), and WORKER_MODE:
//   matrix (default)  every collective x buffer placement (device, pinned, managed or pageable
//                     host memory on a stream; device memory with a NULL stream; recclMemAlloc's
//                     memory registered with recclCommRegister, on a stream) x in place or
//                     not x a few types and ops. On the stream, the input copy sits behind a
//                     kernel that holds the stream for 2 ms and the output copy right after the
//                     collective, with no host synchronization between: a collective that did
//                     not wait for its stream, or a stream that did not wait for the collective,
//                     reads or returns the poison. WORKER_COUNT elements (default 200003).
//   loop              WORKER_ITERS (100) allreduces of WORKER_COUNT (1M) floats on device
//                     buffers and a stream, each checked; "iteration K" every 10.
//   async-error       rank 0 enqueues an allreduce that rank 1 never joins (it aborts its
//                     communicator): rank 0 must see recclCommGetAsyncError report it, its stream
//                     must complete, and its next call must fail.
// Every mode first checks that recclCommCuDevice names the device the init ran on.
// Output: "started rank R", "done rank R iters N failovers F cases C", "worker rank R: <what>".
// Exit: 0 all correct, 1 wrong result, 2 set-up failed, 3 CUDA error, 10 + recclResult_t of the
// first failing call.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_data.h"
#include "reccl/reccl.h"
#include "reduce/reduce.h"
#include "spin_kernel.h"

namespace {

using reccl::bench::Coll;
using reccl::bench::DataSpec;
using reccl::bench::Shape;

int gRank = 0;

int envInt(const char* name, int def) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : def;
}

#define CUDA_OR_EXIT(call)                                                                        \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::printf("worker rank %d: %s: %s\n", gRank, #call, cudaGetErrorString(e_));              \
      std::exit(3);                                                                               \
    }                                                                                             \
  } while (0)

#define RECCL_OR_EXIT(call, comm)                                                                 \
  do {                                                                                            \
    recclResult_t r_ = (call);                                                                    \
    if (r_ != recclSuccess) {                                                                     \
      std::printf("worker rank %d: %s: %s: %s\n", gRank, #call, recclGetErrorString(r_),         \
                  recclGetLastError(comm));                                                       \
      std::exit(10 + int(r_));                                                                    \
    }                                                                                             \
  } while (0)

// kRegistered: device memory from recclMemAlloc, registered with the communicator.
enum class Place { kDevice, kPinned, kManaged, kHost, kDeviceNullStream, kRegistered };
const char* placeName(Place p) {
  switch (p) {
    case Place::kDevice: return "device";
    case Place::kPinned: return "pinned";
    case Place::kManaged: return "managed";
    case Place::kHost: return "host";
    case Place::kDeviceNullStream: return "device-null-stream";
    case Place::kRegistered: return "registered";
  }
  return "?";
}

// One user buffer in the placement's memory.
struct UserBuffer {
  Place place;
  unsigned char* p = nullptr;
  recclComm_t comm = nullptr;  // kRegistered: registered with it
  void* handle = nullptr;
  UserBuffer(Place pl, size_t bytes, recclComm_t c = nullptr) : place(pl), comm(c) {
    void* v = nullptr;
    switch (pl) {
      case Place::kRegistered:
        RECCL_OR_EXIT(recclMemAlloc(&v, bytes), comm);
        RECCL_OR_EXIT(recclCommRegister(comm, v, bytes, &handle), comm);
        break;
      case Place::kDevice:
      case Place::kDeviceNullStream: CUDA_OR_EXIT(cudaMalloc(&v, bytes)); break;
      case Place::kPinned: CUDA_OR_EXIT(cudaHostAlloc(&v, bytes, cudaHostAllocDefault)); break;
      case Place::kManaged: CUDA_OR_EXIT(cudaMallocManaged(&v, bytes)); break;
      case Place::kHost: v = std::aligned_alloc(256, (bytes + 255) / 256 * 256); break;
    }
    p = static_cast<unsigned char*>(v);
  }
  ~UserBuffer() {
    switch (place) {
      case Place::kRegistered:
        RECCL_OR_EXIT(recclCommDeregister(comm, handle), comm);
        RECCL_OR_EXIT(recclMemFree(p), comm);
        break;
      case Place::kDevice:
      case Place::kDeviceNullStream:
      case Place::kManaged: cudaFree(p); break;
      case Place::kPinned: cudaFreeHost(p); break;
      case Place::kHost: std::free(p); break;
    }
  }
  UserBuffer(const UserBuffer&) = delete;
  UserBuffer& operator=(const UserBuffer&) = delete;
};

recclResult_t issue(Coll c, const void* send, void* recv, const Shape& s, const DataSpec& d, recclComm_t comm,
                    recclStream_t st, int rank, int n) {
  switch (c) {
    case Coll::kAllReduce: return recclAllReduce(send, recv, s.paramCount, d.type, d.op, comm, st);
    case Coll::kAllGather: return recclAllGather(send, recv, s.paramCount, d.type, comm, st);
    case Coll::kReduceScatter: return recclReduceScatter(send, recv, s.paramCount, d.type, d.op, comm, st);
    case Coll::kBroadcast: return recclBroadcast(send, recv, s.paramCount, d.type, d.root, comm, st);
    case Coll::kReduce: return recclReduce(send, recv, s.paramCount, d.type, d.op, d.root, comm, st);
    case Coll::kAllToAll: return recclAllToAll(send, recv, s.paramCount, d.type, comm, st);
    case Coll::kGather: return recclGather(send, recv, s.paramCount, d.type, d.root, comm, st);
    case Coll::kScatter: return recclScatter(send, recv, s.paramCount, d.type, d.root, comm, st);
    case Coll::kSendRecv: {
      recclResult_t r = recclGroupStart();
      if (r != recclSuccess) return r;
      recclResult_t rs = recclSend(send, s.paramCount, d.type, (rank + 1) % n, comm, st);
      recclResult_t rr = recclRecv(recv, s.paramCount, d.type, (rank - 1 + n) % n, comm, st);
      r = recclGroupEnd();
      return rs != recclSuccess ? rs : rr != recclSuccess ? rr : r;
    }
  }
  return recclInvalidArgument;
}

// One checked collective; returns the wrong elements of this rank.
uint64_t runCase(recclComm_t comm, cudaStream_t stream, Coll c, recclDataType_t t, recclRedOp_t op, Place place,
                 bool inPlace, size_t count, int rank, int n) {
  const size_t es = reccl::reduce::typeSize(t);
  DataSpec d{c, t, op, n, reccl::bench::collHasRoot(c) ? 1 % n : 0};
  Shape s = reccl::bench::shapeFor(c, count, n, rank);
  const size_t bytes = (s.count + 1) * es;
  // The host side of the copies is pinned, so the stream's copies are truly asynchronous (a
  // pageable source would make cudaMemcpyAsync wait for the stream first).
  std::vector<unsigned char> out(bytes, 0xA5);
  UserBuffer inBuf(Place::kPinned, bytes), resultBuf(Place::kPinned, bytes);
  unsigned char* in = inBuf.p;
  unsigned char* result = resultBuf.p;
  UserBuffer send(place, bytes, comm), recv(place, bytes, comm);
  // Where the call's buffers sit (reccl-bench's in-place conventions) and what the host stages.
  unsigned char* sendPtr = send.p;
  unsigned char* recvPtr = recv.p;
  unsigned char* inDst = send.p;  // the user buffer the input is copied into
  size_t inBytes = s.sendCount * es;
  if (inPlace) {
    if (c == Coll::kAllGather || c == Coll::kGather) {
      sendPtr = recv.p + s.inPlaceSendOffset * es;
      recvPtr = recv.p;
      inDst = sendPtr;
    } else {
      sendPtr = recv.p;
      recvPtr = recv.p + s.inPlaceRecvOffset * es;
      inDst = recv.p;
      inBytes = s.sendCount * es;
    }
  }
  reccl::bench::fillInput(d, rank, s, in);
  const bool nullStream = place == Place::kDeviceNullStream;
  recclStream_t st = nullStream ? nullptr : reinterpret_cast<recclStream_t>(stream);
  // Poison both buffers; the input then goes over the poison (in place: into the receive buffer).
  CUDA_OR_EXIT(cudaMemcpy(recv.p, out.data(), s.recvCount * es + es, cudaMemcpyDefault));
  CUDA_OR_EXIT(cudaMemcpy(send.p, out.data(), s.sendCount * es + es, cudaMemcpyDefault));
  if (nullStream) {
    CUDA_OR_EXIT(cudaMemcpy(inDst, in, inBytes, cudaMemcpyDefault));
  } else {
    // A blocking copy from pageable memory may return before its DMA lands, on the legacy stream,
    // which the call's non-blocking stream does not wait for: the whole device first.
    CUDA_OR_EXIT(cudaDeviceSynchronize());
    CUDA_OR_EXIT(reccl::test::launchSpin(stream, 2000));
    CUDA_OR_EXIT(cudaMemcpyAsync(inDst, in, inBytes, cudaMemcpyDefault, stream));
  }
  RECCL_OR_EXIT(issue(c, sendPtr, recvPtr, s, d, comm, st, rank, n), comm);
  if (nullStream) {
    CUDA_OR_EXIT(cudaMemcpy(result, recvPtr, s.recvCount * es, cudaMemcpyDefault));
  } else if (place == Place::kHost || place == Place::kPinned) {
    // Host to host: CUDA may copy at call time instead of in stream order (pageable memory is
    // staged when the call is made), before the library has written the output. The stream's
    // end is the collective's end: wait for it, then read on the host.
    CUDA_OR_EXIT(cudaStreamSynchronize(stream));
    std::memcpy(result, recvPtr, s.recvCount * es);
  } else {
    CUDA_OR_EXIT(cudaMemcpyAsync(result, recvPtr, s.recvCount * es, cudaMemcpyDefault, stream));
    CUDA_OR_EXIT(cudaStreamSynchronize(stream));
  }
  size_t first = 0;
  uint64_t wrong = reccl::bench::countWrong(d, rank, s, result, &first);
  if (wrong)
    std::printf("worker rank %d: %s %s %s %s%s: %" PRIu64 " wrong, first at %zu\n", rank, reccl::bench::collName(c),
                reccl::reduce::typeName(t), reccl::reduce::opName(op), placeName(place), inPlace ? " in-place" : "",
                wrong, first);
  return wrong;
}

int matrix(recclComm_t comm, cudaStream_t stream, int rank, int n) {
  const size_t count = static_cast<size_t>(envInt("WORKER_COUNT", 200003));
  struct TypeOp {
    recclDataType_t t;
    recclRedOp_t op;
  };
  const TypeOp typeOps[] = {{recclFloat32, recclSum}, {recclFloat16, recclSum}, {recclBfloat16, recclMax},
                            {recclInt8, recclMin},    {recclFloat64, recclAvg}, {recclUint64, recclProd}};
  const Place places[] = {Place::kDevice, Place::kPinned,           Place::kManaged,
                          Place::kHost,   Place::kDeviceNullStream, Place::kRegistered};
  uint64_t wrong = 0;
  int cases = 0;
  for (Coll c : reccl::bench::kAllColls)
    for (const auto& to : typeOps) {
      // Collectives without a reduction move bytes alike whatever the op: two types are enough.
      if (!reccl::bench::collReduces(c) && to.t != recclFloat32 && to.t != recclFloat16) continue;
      // Gather and scatter are grouped sends and receives, which sendrecv covers for both types.
      if ((c == Coll::kGather || c == Coll::kScatter) && to.t != recclFloat32) continue;
      for (Place p : places)
        for (bool inPlace : {false, true}) {
          if (inPlace && !reccl::bench::collHasInPlace(c)) continue;
          wrong += runCase(comm, stream, c, to.t, to.op, p, inPlace, count, rank, n);
          ++cases;
        }
    }
  // A barrier on the stream, and a collective of no elements, order the stream too.
  RECCL_OR_EXIT(recclBarrier(comm, reinterpret_cast<recclStream_t>(stream)), comm);
  RECCL_OR_EXIT(recclAllReduce(nullptr, nullptr, 0, recclFloat32, recclSum, comm, reinterpret_cast<recclStream_t>(stream)),
                comm);
  CUDA_OR_EXIT(cudaStreamSynchronize(stream));
  recclResult_t async = recclSuccess;
  RECCL_OR_EXIT(recclCommGetAsyncError(comm, &async), comm);
  if (async != recclSuccess) {
    std::printf("worker rank %d: async error after the matrix: %s\n", rank, recclGetLastError(comm));
    return 1;
  }
  std::printf("done rank %d iters 0 failovers 0 cases %d wrong %" PRIu64 "\n", rank, cases, wrong);
  return wrong ? 1 : 0;
}

int loop(recclComm_t comm, cudaStream_t stream, int rank, int n) {
  const int iters = envInt("WORKER_ITERS", 100);
  const size_t count = static_cast<size_t>(envInt("WORKER_COUNT", 1 << 20));
  DataSpec d{Coll::kAllReduce, recclFloat32, recclSum, n, 0};
  Shape s = reccl::bench::shapeFor(Coll::kAllReduce, count, n, rank);
  std::vector<unsigned char> in(count * 4), result(count * 4);
  reccl::bench::fillInput(d, rank, s, in.data());
  UserBuffer send(Place::kDevice, count * 4), recv(Place::kDevice, count * 4);
  CUDA_OR_EXIT(cudaMemcpy(send.p, in.data(), count * 4, cudaMemcpyDefault));
  CUDA_OR_EXIT(cudaDeviceSynchronize());  // the pageable copy's DMA, before the non-blocking stream reads send
  uint64_t wrong = 0;
  for (int it = 0; it < iters; ++it) {
    CUDA_OR_EXIT(cudaMemsetAsync(recv.p, 0xFF, count * 4, stream));
    RECCL_OR_EXIT(recclAllReduce(send.p, recv.p, count, recclFloat32, recclSum, comm,
                                 reinterpret_cast<recclStream_t>(stream)),
                  comm);
    CUDA_OR_EXIT(cudaMemcpyAsync(result.data(), recv.p, count * 4, cudaMemcpyDefault, stream));
    CUDA_OR_EXIT(cudaStreamSynchronize(stream));
    size_t first = 0;
    if (uint64_t w = reccl::bench::countWrong(d, rank, s, result.data(), &first)) {
      std::printf("worker rank %d iteration %d: %" PRIu64 " wrong, first at %zu\n", rank, it, w, first);
      wrong += w;
    }
    if (rank == 0 && (it + 1) % 10 == 0) std::printf("iteration %d\n", it + 1);
    std::fflush(stdout);
  }
  recclResult_t async = recclSuccess;
  RECCL_OR_EXIT(recclCommGetAsyncError(comm, &async), comm);
  recclCommStats_t stats{};
  stats.size = sizeof(stats);
  RECCL_OR_EXIT(recclCommGetStats(comm, &stats), comm);
  std::printf("done rank %d iters %d failovers %" PRIu64 " cases 1 wrong %" PRIu64 "\n", rank, iters, stats.failovers,
              wrong);
  return wrong || async != recclSuccess ? 1 : 0;
}

int asyncError(recclComm_t comm, cudaStream_t stream, int rank) {
  if (rank != 0) {
    recclCommAbort(comm);  // leaves rank 0's collective without a peer
    std::printf("done rank %d iters 0 failovers 0 cases 1 wrong 0\n", rank);
    return 0;
  }
  const size_t count = 1 << 20;
  UserBuffer buf(Place::kDevice, count * 4);
  RECCL_OR_EXIT(recclAllReduce(buf.p, buf.p, count, recclFloat32, recclSum, comm, reinterpret_cast<recclStream_t>(stream)),
                comm);
  recclResult_t async = recclSuccess;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  while (async == recclSuccess && std::chrono::steady_clock::now() < until) {
    RECCL_OR_EXIT(recclCommGetAsyncError(comm, &async), comm);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (async == recclSuccess) {
    std::printf("worker rank 0: no asynchronous error 40 s after the peer left\n");
    return 1;
  }
  std::printf("async error rank 0: %s: %s\n", recclGetErrorString(async), recclGetLastError(comm));
  CUDA_OR_EXIT(cudaStreamSynchronize(stream));  // the gate was opened: the stream goes on
  recclResult_t next = recclAllReduce(buf.p, buf.p, count, recclFloat32, recclSum, comm,
                                      reinterpret_cast<recclStream_t>(stream));
  if (next == recclSuccess) {
    std::printf("worker rank 0: a call after the error succeeded\n");
    return 1;
  }
  std::printf("done rank 0 iters 0 failovers 0 cases 1 wrong 0\n");
  recclCommAbort(comm);
  return 0;
}

}  // namespace

int main() {
  // Line-buffered: a rank killed at its deadline still leaves the lines it printed in the log.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("worker: no CUDA device\n");
    return 77;
  }
  const int local = envInt("LOCAL_RANK", envInt("RANK", 0));
  CUDA_OR_EXIT(cudaSetDevice(local % ndev));
  cudaStream_t stream = nullptr;
  CUDA_OR_EXIT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  recclComm_t comm = nullptr;
  RECCL_OR_EXIT(recclCommInitFromEnv(&comm), nullptr);
  int n = 1;
  RECCL_OR_EXIT(recclCommUserRank(comm, &gRank), comm);
  RECCL_OR_EXIT(recclCommCount(comm, &n), comm);
  int commDevice = -1;
  RECCL_OR_EXIT(recclCommCuDevice(comm, &commDevice), comm);
  if (commDevice != local % ndev) {
    std::printf("worker rank %d: recclCommCuDevice says device %d, the init ran on device %d\n", gRank, commDevice,
                local % ndev);
    return 1;
  }
  std::printf("started rank %d\n", gRank);
  std::fflush(stdout);
  std::string mode = getenv("WORKER_MODE") ? getenv("WORKER_MODE") : "matrix";
  int rc;
  if (mode == "loop") {
    rc = loop(comm, stream, gRank, n);
  } else if (mode == "async-error") {
    return asyncError(comm, stream, gRank);  // aborted its communicator already
  } else if (mode == "matrix") {
    rc = matrix(comm, stream, gRank, n);
  } else {
    std::printf("worker: unknown WORKER_MODE=%s\n", mode.c_str());
    return 2;
  }
  std::fflush(stdout);
  recclCommDestroy(comm);
  cudaStreamDestroy(stream);
  return rc;
}
