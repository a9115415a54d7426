#include "rank_runner.h"

#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench_data.h"
#include "call_op.h"
#include "reduce/reduce.h"
#include "source_wait.h"

namespace reccl::bench {
namespace {

using Clock = std::chrono::steady_clock;

double usSince(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

// One rank's pid and host, as every rank sends it to rank 0.
struct DeviceRecord {
  int32_t pid;
  char host[124];
};

}  // namespace

void FreeDeleter::operator()(void* p) const noexcept { std::free(p); }

bool RankRunner::fail(std::string msg) {
  error_ = "rank " + std::to_string(rank_) + ": " + msg;
  return false;
}

bool RankRunner::callFailed(const char* what, recclResult_t r) {
  const char* detail = recclGetLastError(comm_);
  return fail(std::string(what) + " failed: " + recclGetErrorString(r) + (detail && *detail ? ": " : "") +
              (detail ? detail : ""));
}

bool RankRunner::gatherDevices() {
  DeviceRecord mine{};
  mine.pid = int32_t(getpid());
  gethostname(mine.host, sizeof mine.host - 1);
  std::vector<DeviceRecord> all(static_cast<size_t>(nranks_));
  if (recclResult_t r = recclAllGather(&mine, all.data(), sizeof mine, recclUint8, comm_, nullptr); r != recclSuccess)
    return callFailed("recclAllGather(devices)", r);
  if (!report_) return true;
  for (int i = 0; i < nranks_; ++i) {
    DeviceInfo d;
    d.rank = i;
    d.pid = all[size_t(i)].pid;
    d.hostname.assign(all[size_t(i)].host, strnlen(all[size_t(i)].host, sizeof all[size_t(i)].host));
    for (int j = 0; j < i; ++j) d.device += devices_[size_t(j)].hostname == d.hostname;  // index on its host
    d.info = std::string("host memory, reduction kernels ") + reduce::isaName();
    devices_.push_back(d);
  }
  return true;
}

bool RankRunner::run() {
  const size_t pad = size_t(o_.unalign) * 8 + 64;
  const size_t rounded = (size_t(o_.maxBytes) + pad + 63) / 64 * 64;
  for (Buffer* b : {&send_, &recv_}) {
    b->reset(static_cast<unsigned char*>(std::aligned_alloc(64, rounded)));
    if (!*b) return fail("cannot allocate two buffers of " + std::to_string(o_.maxBytes) + " bytes");
  }
  // -R: registered for the whole run, every row's buffers lie inside; ended on every way out
  // (-R 2's windows together on every rank, as they were made).
  struct Registered {
    recclComm_t comm;
    bool window = false;
    void* handle = nullptr;
    ~Registered() {
      if (handle && window) recclCommWindowDeregister(comm, static_cast<recclWindow_t>(handle));
      if (handle && !window) recclCommDeregister(comm, handle);
    }
  } regs[2] = {{comm_, o_.localRegister == 2}, {comm_, o_.localRegister == 2}};
  for (int i = 0; i < 2 && o_.localRegister > 0; ++i) {
    void* buf = (i ? recv_ : send_).get();
    recclWindow_t w = nullptr;
    const recclResult_t r = regs[i].window
                                ? recclCommWindowRegister(comm_, buf, rounded, &w, RECCL_WIN_COLL_SYMMETRIC)
                                : recclCommRegister(comm_, buf, rounded, &regs[i].handle);
    if (regs[i].window) regs[i].handle = w;
    if (r != recclSuccess) return callFailed(regs[i].window ? "recclCommWindowRegister" : "recclCommRegister", r);
  }
  const SourceWait sw = waitFaultSourceReady(comm_);
  if (!gatherDevices()) return false;
  if (report_) {
    int version = 0;
    recclGetVersion(&version);
    std::string out = formatVersionLines("reccl-bench", RECCL_VERSION_CODE, version, o_.argv.empty() ? "" : o_.argv[0]);
    out += formatRunLine(o_) + "# Using devices\n";
    for (const DeviceInfo& d : devices_) out += formatDeviceLine(d.rank, d.group, d.pid, d.hostname, d.device, d.info);
    out += "# nRanks " + std::to_string(nranks_) + ": " + (processes_ ? "one per process" : "threads of one process") + "\n";
    out += formatSourceLine(sw);
    if (o_.localRegister == 1) out += "# Buffers registered with each communicator (recclCommRegister, -R 1)\n";
    if (o_.localRegister == 2) out += "# Buffers registered as symmetric windows (recclCommWindowRegister, -R 2)\n";
    std::printf("%s", out.c_str());
  }
  const TableStyle style = TableStyle::of(o_);
  for (int cycle = 0; o_.runCycles == 0 || cycle < o_.runCycles; ++cycle) {
    for (Coll c : o_.colls) {
      if (report_) std::printf("#\n# Collective: %s\n%s", collName(c), formatColumnHeader(style).c_str());
      std::fflush(stdout);
      for (recclDataType_t t : o_.types) {
        std::vector<recclRedOp_t> ops = collReduces(c) ? o_.ops : std::vector<recclRedOp_t>{recclSum};
        for (recclRedOp_t op : ops) {
          for (int root : rootsOf(c, o_.root, nranks_))
            for (int64_t bytes : sizeList(o_))
              if (!runRow(c, t, op, root, bytes)) return false;
        }
      }
    }
  }
  return true;
}

recclResult_t RankRunner::issue(Coll c, const void* send, void* recv, const Shape& s, recclDataType_t t,
                                recclRedOp_t op, int root) {
  switch (c) {
    case Coll::kAllReduce: return recclAllReduce(send, recv, s.paramCount, t, op, comm_, nullptr);
    case Coll::kAllGather: return recclAllGather(send, recv, s.paramCount, t, comm_, nullptr);
    case Coll::kReduceScatter: return recclReduceScatter(send, recv, s.paramCount, t, op, comm_, nullptr);
    case Coll::kBroadcast: return recclBroadcast(send, recv, s.paramCount, t, root, comm_, nullptr);
    case Coll::kReduce: return recclReduce(send, recv, s.paramCount, t, op, root, comm_, nullptr);
    case Coll::kAllToAll: return recclAlltoAll(send, recv, s.paramCount, t, comm_, nullptr);
    case Coll::kGather: return recclGather(send, recv, s.paramCount, t, root, comm_, nullptr);
    case Coll::kScatter: return recclScatter(send, recv, s.paramCount, t, root, comm_, nullptr);
    case Coll::kSendRecv: {
      recclResult_t r = recclGroupStart();
      if (r != recclSuccess) return r;
      recclResult_t rs = recclSend(send, s.paramCount, t, (rank_ + 1) % nranks_, comm_, nullptr);
      recclResult_t rr = recclRecv(recv, s.paramCount, t, (rank_ - 1 + nranks_) % nranks_, comm_, nullptr);
      r = recclGroupEnd();
      return rs != recclSuccess ? rs : rr != recclSuccess ? rr : r;
    }
  }
  return recclInvalidArgument;
}

// Points send/recv at the row's buffers (-u elements past their aligned start) and fills the
// input (and poisons the output).
void RankRunner::prepare(Coll c, const DataSpec& d, const Shape& s, bool inPlace, const void** send, void** recv) {
  const size_t es = reduce::typeSize(d.type);
  unsigned char* sb = send_.get() + size_t(o_.unalign) * es;
  unsigned char* rb = recv_.get() + size_t(o_.unalign) * es;
  if (!inPlace) {
    std::memset(rb, 0xA5, s.recvCount * es);
    fillInput(d, rank_, s, sb);
    *send = sb;
    *recv = rb;
    return;
  }
  if (c == Coll::kAllGather || c == Coll::kGather) {  // my contribution already sits at my slot of the output
    std::memset(rb, 0xA5, s.recvCount * es);
    fillInput(d, rank_, s, rb + s.inPlaceSendOffset * es);
    *send = rb + s.inPlaceSendOffset * es;
    *recv = rb;
  } else {  // one buffer; reducescatter's and scatter's output is my slot of the input
    fillInput(d, rank_, s, rb);
    *send = rb;
    *recv = rb + s.inPlaceRecvOffset * es;
  }
}

// -a: rank 0's time (0), the mean (1), the minimum (2) or the maximum (3) over ranks, agreed
// through the library itself as nccl-tests does with MPI.
bool RankRunner::reduceTime(double* us) {
  recclResult_t r;
  switch (o_.average) {
    case 0: r = recclBroadcast(us, us, 1, recclFloat64, 0, comm_, nullptr); break;
    case 2: r = recclAllReduce(us, us, 1, recclFloat64, recclMin, comm_, nullptr); break;
    case 3: r = recclAllReduce(us, us, 1, recclFloat64, recclMax, comm_, nullptr); break;
    default:
      r = recclAllReduce(us, us, 1, recclFloat64, recclSum, comm_, nullptr);
      *us /= nranks_;
  }
  return r == recclSuccess || callFailed("reducing the time over ranks", r);
}

// -I: each iteration's time is the slowest rank's; rank 0 also keeps every process's own.
bool RankRunner::perIteration(std::vector<double> iterUs, IterStats* out) {
  std::vector<double> slowest(iterUs.size());
  if (recclResult_t r = recclAllReduce(iterUs.data(), slowest.data(), iterUs.size(), recclFloat64, recclMax, comm_, nullptr);
      r != recclSuccess)
    return callFailed("recclAllReduce(per-iteration times)", r);
  std::vector<std::vector<double>> rows;
  if (processes_ && nranks_ > 1) {
    std::vector<double> all(iterUs.size() * size_t(nranks_));
    if (recclResult_t r = recclAllGather(iterUs.data(), all.data(), iterUs.size(), recclFloat64, comm_, nullptr);
        r != recclSuccess)
      return callFailed("recclAllGather(per-iteration times)", r);
    for (int p = 0; p < nranks_; ++p)
      rows.emplace_back(all.begin() + ptrdiff_t(iterUs.size()) * p, all.begin() + ptrdiff_t(iterUs.size()) * (p + 1));
  }
  *out = iterStats(std::move(slowest), o_.perIterSkip);
  out->perProcessUs = std::move(rows);
  return true;
}

// -c N: N checked calls, each on refilled input and poisoned output, stopping at the first with
// a wrong element; the wrong counts are summed over ranks.
bool RankRunner::checkRow(Coll c, const DataSpec& d, const Shape& s, bool inPlace, int64_t* wrong) {
  *wrong = 0;
  for (int k = 0; k < o_.checkIters; ++k) {
    const void* send;
    void* recv;
    prepare(c, d, s, inPlace, &send, &recv);
    // Every rank's output is poisoned and its input refilled before anyone starts.
    if (recclResult_t r = recclBarrier(comm_, nullptr); r != recclSuccess) return callFailed("recclBarrier", r);
    if (recclResult_t r = issue(c, send, recv, s, d.type, callOp_, d.root); r != recclSuccess)
      return callFailed(collName(c), r);
    size_t first = 0;
    uint64_t mine = countWrong(d, rank_, s, recv, &first);
    if (mine)
      std::fprintf(stderr, "reccl-bench: rank %d: %s %s %s %s count %zu: %" PRIu64 " wrong, first at %zu\n", rank_,
                   collName(c), inPlace ? "in-place" : "out-of-place", reduce::typeName(d.type), opName(d.op),
                   s.count, mine, first);
    if (recclResult_t r = recclAllReduce(&mine, &mine, 1, recclUint64, recclSum, comm_, nullptr); r != recclSuccess)
      return callFailed("recclAllReduce(wrong count)", r);
    *wrong = int64_t(mine);
    if (mine) break;
  }
  return true;
}

bool RankRunner::timeOne(Coll c, const DataSpec& d, const Shape& s, bool inPlace, Timing* out) {
  const void* send;
  void* recv;
  prepare(c, d, s, inPlace, &send, &recv);
  auto barrier = [&] {
    recclResult_t r = recclBarrier(comm_, nullptr);
    return r == recclSuccess || callFailed("recclBarrier", r);
  };
  if (!barrier()) return false;
  for (int i = 0; i < o_.warmupIters; ++i)
    if (recclResult_t r = issue(c, send, recv, s, d.type, callOp_, d.root); r != recclSuccess)
      return callFailed(collName(c), r);
  if (!barrier()) return false;
  std::vector<double> iterUs;
  double callsOnlyUs = 0;  // -z 3: the barriers after each iteration are not timed
  const auto t0 = Clock::now();
  for (int i = 0; i < o_.iters; ++i) {
    const auto ti = Clock::now();
    for (int a = 0; a < o_.aggIters; ++a) {
      if (recclResult_t r = issue(c, send, recv, s, d.type, callOp_, d.root); r != recclSuccess)
        return callFailed(collName(c), r);
      if (o_.blocking == 1 && !barrier()) return false;
    }
    const auto te = Clock::now();
    if (o_.perIterTiming) iterUs.push_back(usSince(ti, te) / o_.aggIters);
    if (o_.blocking == 3) {
      callsOnlyUs += usSince(ti, te);
      if (!barrier()) return false;
    }
  }
  double us = (o_.blocking == 3 ? callsOnlyUs : usSince(t0, Clock::now())) / (double(o_.iters) * o_.aggIters);
  if (!reduceTime(&us)) return false;
  std::optional<IterStats> perIter;
  if (o_.perIterTiming) {
    IterStats st;
    if (!perIteration(std::move(iterUs), &st)) return false;
    perIter = std::move(st);
  }
  int64_t wrong = -1;
  if (o_.check) {
    if (!checkRow(c, d, s, inPlace, &wrong)) return false;
    wrongTotal_ += wrong;
  }
  *out = makeTiming(c, int64_t(s.count * reduce::typeSize(d.type)), us, nranks_, wrong);
  out->perIter = std::move(perIter);
  return true;
}

bool RankRunner::runRow(Coll c, recclDataType_t t, recclRedOp_t op, int root, int64_t bytes) {
  const size_t es = reduce::typeSize(t);
  Shape s = shapeFor(c, size_t(bytes) / es, nranks_, rank_);
  DataSpec d{c, t, op, nranks_, root < 0 ? 0 : root};
  Row row;
  row.coll = c;
  row.count = s.paramCount;
  row.bytes = int64_t(std::max(s.sendCount, s.recvCount) * es);
  row.type = t;
  if (collReduces(c)) row.op = op;
  row.root = root;
  // The calls' op (a mulsum's is made on the communicator for this row); the check uses `op`.
  RedOp rowOp;
  if (recclResult_t r = callOp(collReduces(c) ? op : recclSum, t, rank_, comm_, &rowOp); r != recclSuccess)
    return callFailed("recclRedOpCreatePreMulSum", r);
  callOp_ = rowOp.get();
  Timing oop;
  if (!timeOne(c, d, s, false, &oop)) return false;
  row.outOfPlace = oop;
  if (collHasInPlace(c)) {
    Timing ip;
    if (!timeOne(c, d, s, true, &ip)) return false;
    row.inPlace = ip;
  }
  if (o_.reportTimestamps) row.timestamp = localTimestamp();
  if (report_) {
    std::printf("%s", formatRow(row, TableStyle::of(o_)).c_str());
    std::fflush(stdout);
    report_->add(row);
  }
  return true;
}

}  // namespace reccl::bench
