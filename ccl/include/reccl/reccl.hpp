// Thin C++ layer over the C API: an owning communicator handle and typed calls. Errors are
// returned as recclResult_t (no exceptions), with the message from recclGetLastError.
// Needs C++20 (std::span); the C API in reccl.h needs only C99 or C++11.
#pragma once

#if !defined(__cplusplus) || __cplusplus < 202002L
#error "reccl.hpp needs C++20 (compile with -std=c++20); C and older C++ use reccl/reccl.h"
#endif

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "reccl/reccl.h"

namespace reccl {

template <typename T>
constexpr recclDataType_t dataTypeOf();
template <> constexpr recclDataType_t dataTypeOf<int8_t>() { return recclInt8; }
template <> constexpr recclDataType_t dataTypeOf<uint8_t>() { return recclUint8; }
template <> constexpr recclDataType_t dataTypeOf<int32_t>() { return recclInt32; }
template <> constexpr recclDataType_t dataTypeOf<uint32_t>() { return recclUint32; }
template <> constexpr recclDataType_t dataTypeOf<int64_t>() { return recclInt64; }
template <> constexpr recclDataType_t dataTypeOf<uint64_t>() { return recclUint64; }
template <> constexpr recclDataType_t dataTypeOf<float>() { return recclFloat32; }
template <> constexpr recclDataType_t dataTypeOf<double>() { return recclFloat64; }

// A reduction op for one communicator's calls: a built-in one, or a PreMulSum
// (recclRedOpCreatePreMulSum, its scalar copied when made) that this object destroys.
class RedOp {
 public:
  RedOp() = default;
  explicit RedOp(recclRedOp_t builtIn) : op_(builtIn) {}
  RedOp(RedOp&& o) noexcept : op_(std::exchange(o.op_, recclSum)), comm_(std::exchange(o.comm_, nullptr)) {}
  RedOp& operator=(RedOp&& o) noexcept {
    if (this != &o) {
      reset();
      op_ = std::exchange(o.op_, recclSum);
      comm_ = std::exchange(o.comm_, nullptr);
    }
    return *this;
  }
  RedOp(const RedOp&) = delete;
  RedOp& operator=(const RedOp&) = delete;
  ~RedOp() { reset(); }

  // `scalar`: one element of `type`, this rank's; the op serves calls of `type` on `comm`.
  static recclResult_t preMulSum(RedOp* out, const void* scalar, recclDataType_t type, recclComm_t comm) {
    recclRedOp_t op;
    recclResult_t r =
        recclRedOpCreatePreMulSum(&op, const_cast<void*>(scalar), type, recclScalarHostImmediate, comm);
    if (r != recclSuccess) return r;
    out->reset();
    out->op_ = op;
    out->comm_ = comm;
    return r;
  }

  recclRedOp_t get() const { return op_; }
  void reset() {
    if (comm_) recclRedOpDestroy(op_, comm_);
    comm_ = nullptr;
    op_ = recclSum;
  }

 private:
  recclRedOp_t op_ = recclSum;
  recclComm_t comm_ = nullptr;  // set: a PreMulSum made on it, destroyed by reset()
};

// Owns a recclComm_t; destroys it on scope exit.
class Communicator {
 public:
  Communicator() = default;
  explicit Communicator(recclComm_t c) : comm_(c) {}
  Communicator(Communicator&& o) noexcept : comm_(std::exchange(o.comm_, nullptr)) {}
  Communicator& operator=(Communicator&& o) noexcept {
    if (this != &o) {
      reset();
      comm_ = std::exchange(o.comm_, nullptr);
    }
    return *this;
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator() { reset(); }

  // From torchrun / MPI / Slurm environment variables.
  static recclResult_t fromEnv(Communicator* out) {
    recclComm_t c = nullptr;
    recclResult_t r = recclCommInitFromEnv(&c);
    if (r == recclSuccess) *out = Communicator(c);
    return r;
  }
  // Rank `rank` of `nranks` at the rendezvous of `id` (recclGetUniqueId on one rank, handed to
  // all); config may be NULL.
  static recclResult_t init(Communicator* out, int nranks, const recclUniqueId& id, int rank,
                            recclConfig_t* config = nullptr) {
    recclComm_t c = nullptr;
    recclResult_t r = recclCommInitRankConfig(&c, nranks, id, rank, config);
    if (c) *out = Communicator(c);  // also when recclInProgress (non-blocking config)
    return r;
  }
  // The same with the bootstrap spread over ids.size() roots (recclCommInitRankScalable): every
  // rank passes the same ids in the same order.
  static recclResult_t init(Communicator* out, int nranks, std::span<recclUniqueId> ids, int rank,
                            recclConfig_t* config = nullptr) {
    recclComm_t c = nullptr;
    recclResult_t r = recclCommInitRankScalable(&c, nranks, rank, static_cast<int>(ids.size()), ids.data(), config);
    if (c) *out = Communicator(c);
    return r;
  }
  // Collective over this communicator's ranks; *out is empty for RECCL_SPLIT_NOCOLOR.
  recclResult_t split(int color, int key, Communicator* out, recclConfig_t* config = nullptr) {
    recclComm_t c = nullptr;
    recclResult_t r = recclCommSplit(comm_, color, key, &c, config);
    *out = Communicator(c);
    return r;
  }

  recclComm_t get() const { return comm_; }
  explicit operator bool() const { return comm_ != nullptr; }
  int rank() const {
    int r = -1;
    recclCommUserRank(comm_, &r);
    return r;
  }
  int size() const {
    int n = 0;
    recclCommCount(comm_, &n);
    return n;
  }
  void reset() {
    if (comm_) recclCommDestroy(comm_);
    comm_ = nullptr;
  }
  // Collective: every rank's work on it is done; only destruction may follow.
  recclResult_t finalize() { return recclCommFinalize(comm_); }
  recclResult_t asyncError() const {
    recclResult_t e = recclSuccess;
    recclResult_t r = recclCommGetAsyncError(comm_, &e);
    return r == recclSuccess ? e : r;
  }
  recclResult_t stats(recclCommStats_t* out) const {
    out->size = sizeof(*out);
    return recclCommGetStats(comm_, out);
  }
  // *lost: this rank's connections to `peer` were lost for good (recclCommPeerLost).
  recclResult_t peerLost(int peer, bool* lost) const {
    int l = 0;
    recclResult_t r = recclCommPeerLost(comm_, peer, &l);
    if (r == recclSuccess) *lost = l != 0;
    return r;
  }
  recclResult_t abort() {
    recclResult_t r = comm_ ? recclCommAbort(comm_) : recclSuccess;
    comm_ = nullptr;
    return r;
  }

  template <typename T>
  recclResult_t allReduce(std::span<const T> send, std::span<T> recv, recclRedOp_t op) {
    if (send.size() != recv.size()) return recclInvalidArgument;
    return recclAllReduce(send.data(), recv.data(), send.size(), dataTypeOf<T>(), op, comm_, nullptr);
  }
  template <typename T>
  recclResult_t broadcast(std::span<T> buf, int root) {
    return recclBroadcast(buf.data(), buf.data(), buf.size(), dataTypeOf<T>(), root, comm_, nullptr);
  }
  template <typename T>
  recclResult_t allGather(std::span<const T> send, std::span<T> recv) {
    if (recv.size() != send.size() * static_cast<size_t>(size())) return recclInvalidArgument;
    return recclAllGather(send.data(), recv.data(), send.size(), dataTypeOf<T>(), comm_, nullptr);
  }
  // root's recv holds size() blocks of send.size() elements, rank i's in block i; recv is not
  // read elsewhere (may be empty).
  template <typename T>
  recclResult_t gather(std::span<const T> send, std::span<T> recv, int root) {
    if (rank() == root && recv.size() != send.size() * static_cast<size_t>(size())) return recclInvalidArgument;
    return recclGather(send.data(), recv.data(), send.size(), dataTypeOf<T>(), root, comm_, nullptr);
  }
  // root's send holds size() blocks of recv.size() elements, block i for rank i; send is not read
  // elsewhere (may be empty).
  template <typename T>
  recclResult_t scatter(std::span<const T> send, std::span<T> recv, int root) {
    if (rank() == root && send.size() != recv.size() * static_cast<size_t>(size())) return recclInvalidArgument;
    return recclScatter(send.data(), recv.data(), recv.size(), dataTypeOf<T>(), root, comm_, nullptr);
  }
  // send and recv hold size() blocks of equal length; block i goes to rank i.
  template <typename T>
  recclResult_t allToAll(std::span<const T> send, std::span<T> recv) {
    const size_t n = static_cast<size_t>(size());
    if (n == 0 || send.size() != recv.size() || send.size() % n != 0) return recclInvalidArgument;
    return recclAlltoAll(send.data(), recv.data(), send.size() / n, dataTypeOf<T>(), comm_, nullptr);
  }
  recclResult_t barrier() { return recclBarrier(comm_, nullptr); }
  std::string lastError() const { return recclGetLastError(comm_); }

 private:
  recclComm_t comm_ = nullptr;
};

}  // namespace reccl
