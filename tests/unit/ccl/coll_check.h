// The collectives check matrix, shared by the ranks-as-threads test and the multi-process
// worker the testbed integration tests run.
#pragma once

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "reccl/reccl.h"
#include "values.h"

namespace reccl::test {

constexpr recclDataType_t kTypes[] = {recclInt8,  recclUint8,   recclInt32,   recclUint32, recclInt64,
                                      recclUint64, recclFloat16, recclFloat32, recclFloat64, recclBfloat16};
constexpr recclRedOp_t kOps[] = {recclSum, recclProd, recclMax, recclMin, recclAvg};

// One rank's run through the matrix; returns "" or the first wrong result.
class RankRun {
 public:
  RankRun(int rank, int n, recclComm_t comm) : r_(rank), n_(n), c_(comm) {}

  std::string error;

  bool check(recclResult_t rc, const std::string& what) {
    if (rc == recclSuccess) return true;
    if (error.empty())
      error = what + ": " + recclGetErrorString(rc) + " (" + recclGetLastError(c_) + ")";
    return false;
  }
  void wrong(const std::string& what, size_t i, double got, double want) {
    if (!error.empty()) return;
    std::ostringstream os;
    os << what << ": rank " << r_ << " element " << i << " got " << got << " want " << want;
    error = os.str();
  }
  static std::string tag(const char* coll, recclDataType_t t, recclRedOp_t op, size_t count, bool inPlace) {
    std::ostringstream os;
    os << coll << " " << reccl::reduce::typeName(t) << " " << reccl::reduce::opName(op) << " count " << count
       << (inPlace ? " in-place" : " out-of-place");
    return os.str();
  }

  void allReduce(recclDataType_t t, recclRedOp_t op, size_t count, bool inPlace) {
    size_t es = reccl::reduce::typeSize(t);
    std::vector<std::byte> in(count * es + 1), out(count * es + 1);
    for (size_t i = 0; i < count; ++i) setValue(in.data(), i, t, inputValue(r_, i, t, op));
    void* dst = inPlace ? in.data() : out.data();
    auto what = tag("allreduce", t, op, count, inPlace);
    if (!check(recclAllReduce(in.data(), dst, count, t, op, c_, nullptr), what)) return;
    for (size_t i = 0; i < count; ++i) {
      double want = reduceRef(n_, i, t, op), got = getValue(dst, i, t);
      if (!matches(got, want, t, op)) return wrong(what, i, got, want);
    }
  }

  void reduce(recclDataType_t t, recclRedOp_t op, size_t count, bool inPlace, int root) {
    size_t es = reccl::reduce::typeSize(t);
    std::vector<std::byte> in(count * es + 1), out(count * es + 1);
    for (size_t i = 0; i < count; ++i) setValue(in.data(), i, t, inputValue(r_, i, t, op));
    void* dst = inPlace ? in.data() : out.data();
    auto what = tag("reduce", t, op, count, inPlace) + " root " + std::to_string(root);
    if (!check(recclReduce(in.data(), dst, count, t, op, root, c_, nullptr), what)) return;
    if (r_ != root) return;
    for (size_t i = 0; i < count; ++i) {
      double want = reduceRef(n_, i, t, op), got = getValue(dst, i, t);
      if (!matches(got, want, t, op)) return wrong(what, i, got, want);
    }
  }

  void reduceScatter(recclDataType_t t, recclRedOp_t op, size_t count, bool inPlace) {
    size_t es = reccl::reduce::typeSize(t);
    std::vector<std::byte> in(count * n_ * es + 1), out(count * es + 1);
    for (size_t i = 0; i < count * n_; ++i) setValue(in.data(), i, t, inputValue(r_, i, t, op));
    void* dst = inPlace ? in.data() + r_ * count * es : out.data();
    auto what = tag("reducescatter", t, op, count, inPlace);
    if (!check(recclReduceScatter(in.data(), dst, count, t, op, c_, nullptr), what)) return;
    for (size_t i = 0; i < count; ++i) {
      double want = reduceRef(n_, i, t, op, r_ * count), got = getValue(dst, i, t);
      if (!matches(got, want, t, op)) return wrong(what, i, got, want);
    }
  }

  void allGather(recclDataType_t t, size_t count, bool inPlace) {
    size_t es = reccl::reduce::typeSize(t);
    std::vector<std::byte> in(count * es + 1), out(count * n_ * es + 1);
    void* src = inPlace ? out.data() + r_ * count * es : in.data();
    for (size_t i = 0; i < count; ++i) setValue(src, i, t, inputValue(r_, i, t, recclSum));
    auto what = tag("allgather", t, recclSum, count, inPlace);
    if (!check(recclAllGather(src, out.data(), count, t, c_, nullptr), what)) return;
    for (int k = 0; k < n_; ++k)
      for (size_t i = 0; i < count; ++i) {
        double want = inputValue(k, i, t, recclSum), got = getValue(out.data(), k * count + i, t);
        if (got != want) return wrong(what, k * count + i, got, want);
      }
  }

  void broadcast(recclDataType_t t, size_t count, bool inPlace, int root) {
    size_t es = reccl::reduce::typeSize(t);
    std::vector<std::byte> in(count * es + 1), out(count * es + 1);
    for (size_t i = 0; i < count; ++i) setValue(in.data(), i, t, r_ == root ? inputValue(root, i, t, recclSum) : 99);
    void* dst = inPlace ? in.data() : out.data();
    auto what = tag("broadcast", t, recclSum, count, inPlace) + " root " + std::to_string(root);
    if (!check(recclBroadcast(in.data(), dst, count, t, root, c_, nullptr), what)) return;
    for (size_t i = 0; i < count; ++i) {
      double want = inputValue(root, i, t, recclSum), got = getValue(dst, i, t);
      if (got != want) return wrong(what, i, got, want);
    }
  }

  void allToAll(recclDataType_t t, size_t count) {
    size_t es = reccl::reduce::typeSize(t);
    std::vector<std::byte> in(count * n_ * es + 1), out(count * n_ * es + 1);
    // Element i of the block for peer j encodes (sender, j, i).
    for (int j = 0; j < n_; ++j)
      for (size_t i = 0; i < count; ++i) setValue(in.data(), j * count + i, t, (r_ * 3 + j * 5 + i) % 11);
    auto what = tag("alltoall", t, recclSum, count, false);
    if (!check(recclAllToAll(in.data(), out.data(), count, t, c_, nullptr), what)) return;
    for (int j = 0; j < n_; ++j)
      for (size_t i = 0; i < count; ++i) {
        double want = (j * 3 + r_ * 5 + i) % 11, got = getValue(out.data(), j * count + i, t);
        if (got != want) return wrong(what, j * count + i, got, want);
      }
  }

  // Rank j's block for gather, and root's block j for scatter: element i is (j * 7 + i + 3 * root) % 13.
  static double blockValue(int j, size_t i, int root) { return static_cast<double>((j * 7 + i + 3 * root) % 13); }

  // In place (at root): root's block is already at its place in the output.
  void gather(recclDataType_t t, size_t count, bool inPlace, int root) {
    size_t es = reccl::reduce::typeSize(t);
    std::vector<std::byte> in(count * es + 1), out(count * n_ * es + 1, std::byte{0xA5});
    void* send = inPlace && r_ == root ? out.data() + static_cast<size_t>(root) * count * es : in.data();
    for (size_t i = 0; i < count; ++i) setValue(send, i, t, blockValue(r_, i, root));
    auto what = tag("gather", t, recclSum, count, inPlace) + " root " + std::to_string(root);
    // A non-root rank's recvbuff is not used: a null one must do.
    if (!check(recclGather(send, r_ == root ? out.data() : nullptr, count, t, root, c_, nullptr), what)) return;
    if (r_ != root) return;
    for (int j = 0; j < n_; ++j)
      for (size_t i = 0; i < count; ++i) {
        double want = blockValue(j, i, root), got = getValue(out.data(), j * count + i, t);
        if (got != want) return wrong(what + " block " + std::to_string(j), i, got, want);
      }
  }

  // In place (at root): root's block is left where it is, as its output.
  void scatter(recclDataType_t t, size_t count, bool inPlace, int root) {
    size_t es = reccl::reduce::typeSize(t);
    std::vector<std::byte> in(count * n_ * es + 1), out(count * es + 1, std::byte{0xA5});
    if (r_ == root)
      for (int j = 0; j < n_; ++j)
        for (size_t i = 0; i < count; ++i) setValue(in.data(), j * count + i, t, blockValue(j, i, root));
    void* recv = inPlace && r_ == root ? in.data() + static_cast<size_t>(root) * count * es : out.data();
    auto what = tag("scatter", t, recclSum, count, inPlace) + " root " + std::to_string(root);
    // A non-root rank's sendbuff is not used: a null one must do.
    if (!check(recclScatter(r_ == root ? in.data() : nullptr, recv, count, t, root, c_, nullptr), what)) return;
    for (size_t i = 0; i < count; ++i) {
      double want = blockValue(r_, i, root), got = getValue(recv, i, t);
      if (got != want) return wrong(what, i, got, want);
    }
  }

  // Group send/recv: ring shift by `shift` plus a self send/recv.
  void sendRecv(recclDataType_t t, size_t count, int shift) {
    size_t es = reccl::reduce::typeSize(t);
    std::vector<std::byte> in(count * es + 1), out(count * es + 1), self(count * es + 1);
    for (size_t i = 0; i < count; ++i) setValue(in.data(), i, t, (r_ + i) % 9);
    int to = (r_ + shift) % n_, from = (r_ - shift % n_ + n_) % n_;
    auto what = tag("sendrecv", t, recclSum, count, false) + " shift " + std::to_string(shift);
    recclGroupStart();
    recclSend(in.data(), count, t, to, c_, nullptr);
    recclRecv(out.data(), count, t, from, c_, nullptr);
    recclSend(in.data(), count, t, r_, c_, nullptr);
    recclRecv(self.data(), count, t, r_, c_, nullptr);
    // A second message on the same connection in the same group: matched in call order.
    std::vector<std::byte> in2(count * es + 1), out2(count * es + 1);
    for (size_t i = 0; i < count; ++i) setValue(in2.data(), i, t, (r_ + 2 * i + 1) % 9);
    recclSend(in2.data(), count, t, to, c_, nullptr);
    recclRecv(out2.data(), count, t, from, c_, nullptr);
    if (!check(recclGroupEnd(), what)) return;
    for (size_t i = 0; i < count; ++i) {
      double want = (from + i) % 9, got = getValue(out.data(), i, t);
      if (got != want) return wrong(what, i, got, want);
      if (getValue(self.data(), i, t) != (r_ + i) % 9) return wrong(what + " (self)", i, getValue(self.data(), i, t), (r_ + i) % 9);
      double want2 = (from + 2 * i + 1) % 9;
      if (getValue(out2.data(), i, t) != want2) return wrong(what + " (second message)", i, getValue(out2.data(), i, t), want2);
    }
  }

 private:
  int r_, n_;
  recclComm_t c_;
};


// The whole matrix on one rank (every rank of the communicator calls it with the same args).
// counts: small counts for the full type x op matrix; fullOps false limits ops to sum/avg except
// for float and int8; large adds the 1M+3 subset (WORKER_LARGE_COUNT elements where set). Returns
// "" or the first wrong result.
inline std::string runMatrix(int r, int n, recclComm_t c, const std::vector<size_t>& counts, bool fullOps,
                             bool large) {
  RankRun run(r, n, c);
  int iter = 0;
  for (auto t : kTypes) {
    for (auto op : kOps) {
      if (!fullOps && op != recclSum && op != recclAvg && t != recclFloat32 && t != recclInt8) continue;
      for (size_t count : counts)
        for (bool inPlace : {false, true}) {
          run.allReduce(t, op, count, inPlace);
          run.reduce(t, op, count, inPlace, iter++ % n);
          run.reduceScatter(t, op, count, inPlace);
        }
    }
    for (size_t count : counts)
      for (bool inPlace : {false, true}) {
        run.allGather(t, count, inPlace);
        run.broadcast(t, count, inPlace, iter++ % n);
        run.gather(t, count, inPlace, iter++ % n);
        run.scatter(t, count, inPlace, iter++ % n);
      }
    for (size_t count : counts) {
      run.allToAll(t, count);
      run.sendRecv(t, count, 1);
    }
    if (!run.error.empty()) return run.error;
  }
  run.check(recclBarrier(c, nullptr), "barrier");
  if (large && run.error.empty()) {
    // WORKER_LARGE_COUNT: a smaller subset where each step costs more (a lab guest's soft-RoCE).
    size_t big = (1u << 20) + 3;
    if (const char* v = getenv("WORKER_LARGE_COUNT")) {
      char* end = nullptr;
      big = strtoull(v, &end, 10);
      if (*v == '\0' || *end != '\0' || big < 4 * static_cast<size_t>(n))
        return "WORKER_LARGE_COUNT: expected a count of at least 4 x ranks, got '" + std::string(v) + "'";
    }
    run.allReduce(recclFloat32, recclSum, big, false);
    run.allReduce(recclInt32, recclMax, big, true);
    run.allReduce(recclBfloat16, recclAvg, big, false);
    run.allReduce(recclFloat64, recclProd, big, true);
    run.reduceScatter(recclFloat32, recclSum, big / n, false);
    run.reduceScatter(recclFloat16, recclMin, big / n, true);
    run.allGather(recclUint8, big / n, false);
    run.allGather(recclInt64, big / n, true);
    run.broadcast(recclInt64, big, false, n - 1);
    run.broadcast(recclUint32, big, true, 0);
    run.reduce(recclFloat16, recclSum, big, false, 1 % n);
    run.reduce(recclUint64, recclMax, big, true, 0);
    run.allToAll(recclInt32, big / (4 * n));
    run.gather(recclFloat32, big / n, false, n - 1);
    run.gather(recclUint8, big / n, true, 0);
    run.scatter(recclInt64, big / n, false, 0);
    run.scatter(recclFloat16, big / n, true, n - 1);
    run.sendRecv(recclFloat64, big / 2, n / 2 == 0 ? 1 : n / 2);
  }
  return run.error;
}

}  // namespace reccl::test
