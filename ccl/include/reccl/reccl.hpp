// Thin C++ layer over the C API: owning handles (communicator, PreMulSum op, group, registration,
// window) and typed calls on std::span. Errors are returned as recclResult_t (no exceptions); the
// message is reccl::lastError()'s, which also covers what this layer refuses itself (spans of
// sizes that do not fit the call); every such result is [[nodiscard]]. Needs C++20; the C API
// in reccl.h needs only C99 or C++11.
// Every owning handle is destroyed before the communicator it was made on: declare it after that
// communicator.
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

// The reccl type of an element type. The program's 16-bit floats (CUDA's __half and
// __nv_bfloat16, c10::Half, a struct of its own) get theirs by a specialization:
//   template <> constexpr recclDataType_t reccl::dataTypeOf<__half>() { return recclFloat16; }
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

namespace detail {
// What this layer refused last on this thread, kept with the C API's last-error text of that
// moment. A C call that fails later is the last failure: one made through this layer says so
// (passed), one made directly changes that text (lastError compares it), unless its text is the
// same as the one before the refusal.
struct Refusal {
  std::string text;
  std::string cTextThen;
};
inline thread_local Refusal lastRefusal;
[[nodiscard]] inline recclResult_t refuse(std::string text) {
  lastRefusal = {std::move(text), recclGetLastError(nullptr)};
  return recclInvalidArgument;
}
// A C call's result, passed on; a failure ends the refusal's claim to be the last one (a
// non-blocking init's recclInProgress is none).
inline recclResult_t passed(recclResult_t r) {
  if (r != recclSuccess && r != recclInProgress) lastRefusal.text.clear();
  return r;
}
inline std::string sizeText(const char* what, size_t got, size_t want) {
  return std::string(what) + ": " + std::to_string(got) + " elements, the call needs " + std::to_string(want);
}
}  // namespace detail

// The message of this thread's last failed call, of the C API or of this layer.
inline std::string lastError() {
  const char* c = recclGetLastError(nullptr);
  const detail::Refusal& r = detail::lastRefusal;
  if (!r.text.empty() && r.cTextThen == c) return r.text;
  return c;
}

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
  [[nodiscard]] static recclResult_t preMulSum(RedOp* out, const void* scalar, recclDataType_t type, recclComm_t comm) {
    recclRedOp_t op;
    recclResult_t r =
        detail::passed(recclRedOpCreatePreMulSum(&op, const_cast<void*>(scalar), type, recclScalarHostImmediate, comm));
    if (r != recclSuccess) return r;
    out->reset();
    out->op_ = op;
    out->comm_ = comm;
    return r;
  }

  recclRedOp_t get() const { return op_; }
  void reset() {
    if (comm_) (void)detail::passed(recclRedOpDestroy(op_, comm_));
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
  [[nodiscard]] static recclResult_t fromEnv(Communicator* out) {
    recclComm_t c = nullptr;
    recclResult_t r = detail::passed(recclCommInitFromEnv(&c));
    if (r == recclSuccess) *out = Communicator(c);
    return r;
  }
  // Rank `rank` of `nranks` at the rendezvous of `id` (recclGetUniqueId on one rank, handed to
  // all); config may be NULL.
  [[nodiscard]] static recclResult_t init(Communicator* out, int nranks, const recclUniqueId& id, int rank,
                            recclConfig_t* config = nullptr) {
    recclComm_t c = nullptr;
    recclResult_t r = detail::passed(recclCommInitRankConfig(&c, nranks, id, rank, config));
    if (c) *out = Communicator(c);  // also when recclInProgress (non-blocking config)
    return r;
  }
  // The same with the bootstrap spread over ids.size() roots (recclCommInitRankScalable): every
  // rank passes the same ids in the same order.
  [[nodiscard]] static recclResult_t init(Communicator* out, int nranks, std::span<recclUniqueId> ids, int rank,
                            recclConfig_t* config = nullptr) {
    recclComm_t c = nullptr;
    recclResult_t r = detail::passed(recclCommInitRankScalable(&c, nranks, rank, static_cast<int>(ids.size()), ids.data(), config));
    if (c) *out = Communicator(c);
    return r;
  }
  // Collective over this communicator's ranks; *out is empty for RECCL_SPLIT_NOCOLOR.
  [[nodiscard]] recclResult_t split(int color, int key, Communicator* out, recclConfig_t* config = nullptr) {
    recclComm_t c = nullptr;
    recclResult_t r = detail::passed(recclCommSplit(comm_, color, key, &c, config));
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
    if (comm_) (void)detail::passed(recclCommDestroy(comm_));
    comm_ = nullptr;
  }
  // Collective: every rank's work on it is done; only destruction may follow.
  [[nodiscard]] recclResult_t finalize() {
    return detail::passed(recclCommFinalize(comm_));
  }
  [[nodiscard]] recclResult_t asyncError() const {
    recclResult_t e = recclSuccess;
    recclResult_t r = detail::passed(recclCommGetAsyncError(comm_, &e));
    return r == recclSuccess ? e : r;
  }
  [[nodiscard]] recclResult_t stats(recclCommStats_t* out) const {
    out->size = sizeof(*out);
    return detail::passed(recclCommGetStats(comm_, out));
  }
  // *lost: this rank's connections to `peer` were lost for good (recclCommPeerLost).
  [[nodiscard]] recclResult_t peerLost(int peer, bool* lost) const {
    int l = 0;
    recclResult_t r = detail::passed(recclCommPeerLost(comm_, peer, &l));
    if (r == recclSuccess) *lost = l != 0;
    return r;
  }
  [[nodiscard]] recclResult_t abort() {
    recclResult_t r = comm_ ? detail::passed(recclCommAbort(comm_)) : recclSuccess;
    comm_ = nullptr;
    return r;
  }

  // The collectives, as the C calls of the same names with the element count taken from the
  // spans. `stream`: NULL (host buffers, the call returns when this rank's part is done), or in a
  // CUDA build a cudaStream_t cast to recclStream_t (docs/cuda.md).
  template <typename T>
  [[nodiscard]] recclResult_t allReduce(std::span<const T> send, std::span<T> recv, recclRedOp_t op, recclStream_t stream = nullptr) {
    if (send.size() != recv.size()) return detail::refuse(detail::sizeText("allReduce recv", recv.size(), send.size()));
    return detail::passed(recclAllReduce(send.data(), recv.data(), send.size(), dataTypeOf<T>(), op, comm_, stream));
  }
  template <typename T>
  [[nodiscard]] recclResult_t broadcast(std::span<T> buf, int root, recclStream_t stream = nullptr) {
    return detail::passed(recclBroadcast(buf.data(), buf.data(), buf.size(), dataTypeOf<T>(), root, comm_, stream));
  }
  // root's recv holds send.size() elements; recv is not read elsewhere (may be empty).
  template <typename T>
  [[nodiscard]] recclResult_t reduce(std::span<const T> send, std::span<T> recv, recclRedOp_t op, int root,
                       recclStream_t stream = nullptr) {
    if (rank() == root && recv.size() != send.size())
      return detail::refuse(detail::sizeText("reduce recv at the root", recv.size(), send.size()));
    return detail::passed(recclReduce(send.data(), recv.data(), send.size(), dataTypeOf<T>(), op, root, comm_, stream));
  }
  template <typename T>
  [[nodiscard]] recclResult_t allGather(std::span<const T> send, std::span<T> recv, recclStream_t stream = nullptr) {
    size_t n = 0;
    if (recclResult_t r = nranks(&n); r != recclSuccess) return r;
    if (recv.size() != send.size() * n) return detail::refuse(detail::sizeText("allGather recv", recv.size(), send.size() * n));
    return detail::passed(recclAllGather(send.data(), recv.data(), send.size(), dataTypeOf<T>(), comm_, stream));
  }
  // send holds size() blocks of recv.size() elements; block i is reduced into rank i's recv.
  template <typename T>
  [[nodiscard]] recclResult_t reduceScatter(std::span<const T> send, std::span<T> recv, recclRedOp_t op,
                              recclStream_t stream = nullptr) {
    size_t n = 0;
    if (recclResult_t r = nranks(&n); r != recclSuccess) return r;
    if (send.size() != recv.size() * n)
      return detail::refuse(detail::sizeText("reduceScatter send", send.size(), recv.size() * n));
    return detail::passed(recclReduceScatter(send.data(), recv.data(), recv.size(), dataTypeOf<T>(), op, comm_, stream));
  }
  // root's recv holds size() blocks of send.size() elements, rank i's in block i; recv is not
  // read elsewhere (may be empty).
  template <typename T>
  [[nodiscard]] recclResult_t gather(std::span<const T> send, std::span<T> recv, int root, recclStream_t stream = nullptr) {
    size_t n = 0;
    if (recclResult_t r = nranks(&n); r != recclSuccess) return r;
    if (rank() == root && recv.size() != send.size() * n)
      return detail::refuse(detail::sizeText("gather recv at the root", recv.size(), send.size() * n));
    return detail::passed(recclGather(send.data(), recv.data(), send.size(), dataTypeOf<T>(), root, comm_, stream));
  }
  // root's send holds size() blocks of recv.size() elements, block i for rank i; send is not read
  // elsewhere (may be empty).
  template <typename T>
  [[nodiscard]] recclResult_t scatter(std::span<const T> send, std::span<T> recv, int root, recclStream_t stream = nullptr) {
    size_t n = 0;
    if (recclResult_t r = nranks(&n); r != recclSuccess) return r;
    if (rank() == root && send.size() != recv.size() * n)
      return detail::refuse(detail::sizeText("scatter send at the root", send.size(), recv.size() * n));
    return detail::passed(recclScatter(send.data(), recv.data(), recv.size(), dataTypeOf<T>(), root, comm_, stream));
  }
  // send and recv hold size() blocks of equal length; block i goes to rank i.
  template <typename T>
  [[nodiscard]] recclResult_t allToAll(std::span<const T> send, std::span<T> recv, recclStream_t stream = nullptr) {
    size_t n = 0;
    if (recclResult_t r = nranks(&n); r != recclSuccess) return r;
    if (send.size() % n != 0)
      return detail::refuse("allToAll send: " + std::to_string(send.size()) + " elements, not " +
                            std::to_string(n) + " blocks of equal length");
    if (recv.size() != send.size()) return detail::refuse(detail::sizeText("allToAll recv", recv.size(), send.size()));
    return detail::passed(recclAlltoAll(send.data(), recv.data(), send.size() / n, dataTypeOf<T>(), comm_, stream));
  }
  // Point to point: the peer's matching call has a span of the same length. Outside a group each
  // runs at once and blocks; inside one (reccl::Group) they run together at its end.
  template <typename T>
  [[nodiscard]] recclResult_t send(std::span<const T> buf, int peer, recclStream_t stream = nullptr) {
    return detail::passed(recclSend(buf.data(), buf.size(), dataTypeOf<T>(), peer, comm_, stream));
  }
  template <typename T>
  [[nodiscard]] recclResult_t recv(std::span<T> buf, int peer, recclStream_t stream = nullptr) {
    return detail::passed(recclRecv(buf.data(), buf.size(), dataTypeOf<T>(), peer, comm_, stream));
  }
  [[nodiscard]] recclResult_t barrier(recclStream_t stream = nullptr) {
    return detail::passed(recclBarrier(comm_, stream));
  }
  std::string lastError() const { return reccl::lastError(); }

 private:
  // The rank count, from the C API (which names a bad handle).
  [[nodiscard]] recclResult_t nranks(size_t* n) const {
    int count = 0;
    recclResult_t r = detail::passed(recclCommCount(comm_, &count));
    *n = static_cast<size_t>(count);
    return r;
  }

  recclComm_t comm_ = nullptr;
};

// A group of calls (recclGroupStart .. recclGroupEnd) on this thread: the calls between start()
// and end() are queued and run together at end(), which returns the first failure. A Group
// destroyed while open ends it (so the thread's later calls are not queued for ever); the outcome
// is then only in lastError() and the communicators' async errors: call end() to see it.
class Group {
 public:
  Group() = default;
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  ~Group() {
    if (open_) (void)detail::passed(recclGroupEnd());
  }
  [[nodiscard]] recclResult_t start() {
    if (open_) return detail::refuse("Group: already started");
    recclResult_t r = detail::passed(recclGroupStart());
    open_ = r == recclSuccess;
    return r;
  }
  [[nodiscard]] recclResult_t end() {
    if (!open_) return detail::refuse("Group: not started, or ended already");
    open_ = false;
    return detail::passed(recclGroupEnd());
  }
  bool open() const { return open_; }

 private:
  bool open_ = false;
};

namespace detail {
// A handle made on a communicator and ended by End(comm, handle): moved, never copied, ended by
// reset() or on scope exit. Registration and Window differ only in how they are made.
template <typename H, recclResult_t (*End)(recclComm_t, H)>
class CommHandle {
 public:
  CommHandle() = default;
  CommHandle(CommHandle&& o) noexcept : comm_(std::exchange(o.comm_, nullptr)), h_(std::exchange(o.h_, nullptr)) {}
  CommHandle& operator=(CommHandle&& o) noexcept {
    if (this != &o) {
      (void)reset();
      comm_ = std::exchange(o.comm_, nullptr);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  ~CommHandle() { (void)reset(); }

  H get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }
  // Ends the handle; it is let go whatever the outcome.
  [[nodiscard]] recclResult_t reset() {
    if (!h_) return recclSuccess;
    return passed(End(std::exchange(comm_, nullptr), std::exchange(h_, nullptr)));
  }

 protected:
  // What a make() call returned: the handle this object ends from now on.
  void adopt(recclComm_t comm, H h) {
    (void)reset();
    comm_ = comm;
    h_ = h;
  }

 private:
  recclComm_t comm_ = nullptr;
  H h_ = nullptr;
};
}  // namespace detail

// A buffer registration (recclCommRegister), this rank's alone; ended by reset() or on scope exit.
class Registration : public detail::CommHandle<void*, recclCommDeregister> {
 public:
  [[nodiscard]] static recclResult_t make(Registration* out, const Communicator& comm, void* buf, size_t bytes) {
    void* h = nullptr;
    recclResult_t r = detail::passed(recclCommRegister(comm.get(), buf, bytes, &h));
    if (r == recclSuccess) out->adopt(comm.get(), h);
    return r;
  }
};

// A window (recclCommWindowRegister): made and ended by every rank of the communicator together,
// so every rank's windows end in the same order. reset() ends it and says how that went (a
// window the ranks could not agree to end stays with the communicator, which ends it when it is
// destroyed); the destructor ends a window still live the same way (on a communicator that takes
// no more work, failed or finalized, that ends this rank's window alone).
class Window : public detail::CommHandle<recclWindow_t, recclCommWindowDeregister> {
 public:
  // Collective over comm. `flags`: RECCL_WIN_DEFAULT or RECCL_WIN_COLL_SYMMETRIC.
  [[nodiscard]] static recclResult_t make(Window* out, const Communicator& comm, void* buf, size_t bytes,
                                          int flags = RECCL_WIN_DEFAULT) {
    recclWindow_t w = nullptr;
    recclResult_t r = detail::passed(recclCommWindowRegister(comm.get(), buf, bytes, &w, flags));
    if (r == recclSuccess) out->adopt(comm.get(), w);
    return r;
  }
};

}  // namespace reccl
