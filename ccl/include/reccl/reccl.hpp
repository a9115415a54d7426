// Thin C++ layer over the C API: an owning communicator handle and typed calls. Errors are
// returned as recclResult_t (no exceptions), with the message from recclGetLastError.
#pragma once

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
    return recclAllGather(send.data(), recv.data(), send.size(), dataTypeOf<T>(), comm_, nullptr);
  }
  recclResult_t barrier() { return recclBarrier(comm_, nullptr); }
  std::string lastError() const { return recclGetLastError(comm_); }

 private:
  recclComm_t comm_ = nullptr;
};

}  // namespace reccl
