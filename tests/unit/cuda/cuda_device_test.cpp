// The CUDA path on a GPU (label `device`): the device reduction kernels against the CPU's bit for
// bit, pointer classification of real allocations, the stream gate in both modes, collectives on
// streams with ranks as processes sharing the GPU (cuda_stream_worker), asynchronous errors, and
// the CUDA IPC relay pipe between two processes (cuda_ipc_peer). Without a device every test
// skips with the reason ("no CUDA device ..."), never passes.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda/device_reduce.h"
#include "reduce/reduce.h"
#include "stream/stream_gate.h"
#include "transport/cuda/cuda_owners.h"
#include "transport/cuda/device_probe.h"
#include "transport/cuda/ipc_pipe.h"
#include "transport/cuda/memory_kind.h"
#include "worker_procs.h"

namespace {

namespace cuda = reccl::cuda;
namespace dev = reccl::reduce::cuda;
using reccl::Deadline;
using reccl::Errc;

#define REQUIRE_DEVICE()                                                  \
  do {                                                                    \
    if (cuda::deviceCount() == 0) GTEST_SKIP() << cuda::noDeviceReason(); \
  } while (0)

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

// ---------------------------------------------------------------- reduction kernels

struct KernelCase {
  recclDataType_t type;
  recclRedOp_t op;
};

// Inputs: finite values of every magnitude for floats, with NaN, infinities, signed zeros and
// subnormals sprinkled in; random bits for integers (sums and products wrap).
std::vector<unsigned char> inputs(recclDataType_t t, size_t n, uint32_t seed) {
  const size_t es = reccl::reduce::typeSize(t);
  std::vector<unsigned char> out(n * es);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mant(-2.0, 2.0);
  std::uniform_int_distribution<int> exp(-30, 30);
  const double specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -5e-8, 65504.0, 3e38};
  for (size_t i = 0; i < n; ++i) {
    unsigned char* p = out.data() + i * es;
    double v = i % 97 == 5 ? specials[(i / 97) % std::size(specials)] : std::ldexp(mant(rng), exp(rng));
    uint64_t bits = rng();
    switch (t) {
      case recclFloat32: { float f = float(v); std::memcpy(p, &f, 4); break; }
      case recclFloat64: std::memcpy(p, &v, 8); break;
      case recclFloat16: { uint16_t h = reccl::reduce::floatToHalf(float(std::ldexp(v, -16))); std::memcpy(p, &h, 2); break; }
      case recclBfloat16: { uint16_t h = reccl::reduce::floatToBfloat16(float(v)); std::memcpy(p, &h, 2); break; }
      default: std::memcpy(p, &bits, es); break;
    }
  }
  return out;
}

bool isNan(recclDataType_t t, const unsigned char* p) {
  switch (t) {
    case recclFloat32: { float f; std::memcpy(&f, p, 4); return std::isnan(f); }
    case recclFloat64: { double f; std::memcpy(&f, p, 8); return std::isnan(f); }
    case recclFloat16: { uint16_t h; std::memcpy(&h, p, 2); return (h & 0x7C00) == 0x7C00 && (h & 0x3FF); }
    case recclBfloat16: { uint16_t h; std::memcpy(&h, p, 2); return (h & 0x7F80) == 0x7F80 && (h & 0x7F); }
    default: return false;
  }
}

// One case at one rank count (avg divides by it).
void matchTheCpu(const KernelCase& kc, int nranks);

class DeviceKernels : public ::testing::TestWithParam<KernelCase> {};

// Device and CPU kernels agree bit for bit (a NaN that a sum or a product makes may differ in
// payload only), on the vector path, with a scalar head, with mismatched alignments, in place;
// avg also with more ranks than int8 and uint8 count.
TEST_P(DeviceKernels, MatchTheCpuKernelsBitForBit) {
  REQUIRE_DEVICE();
  const auto kc = GetParam();
  for (int nranks : kc.op == recclAvg ? std::vector<int>{3, 300} : std::vector<int>{3}) {
    SCOPED_TRACE("nranks " + std::to_string(nranks));
    matchTheCpu(kc, nranks);
  }
}

void matchTheCpu(const KernelCase& kc, int nranks) {
  const size_t es = reccl::reduce::typeSize(kc.type);
  const size_t n = (1 << 20) + 37;
  auto a = inputs(kc.type, n, 1), b = inputs(kc.type, n, 2);
  // CPU reference: kernel + avg's division.
  std::vector<unsigned char> want(n * es);
  reccl::reduce::kernel(kc.type, kc.op)(want.data(), a.data(), b.data(), n);
  if (kc.op == recclAvg) reccl::reduce::finalizeAvg(want.data(), n, kc.type, nranks);
  const bool nanPayloadFree = kc.op == recclSum || kc.op == recclProd || kc.op == recclAvg;

  void *da = nullptr, *db = nullptr, *dd = nullptr;
  const size_t pad = 64;
  ASSERT_CUDA(cudaMalloc(&da, n * es + pad));
  ASSERT_CUDA(cudaMalloc(&db, n * es + pad));
  ASSERT_CUDA(cudaMalloc(&dd, n * es + pad));
  struct Layout {
    const char* name;
    size_t offA, offB, offD;
    bool inPlace;
  } layouts[] = {{"aligned", 0, 0, 0, false},
                 {"shared-offset", es, es, es, false},
                 {"mismatched", 0, es, 2 * es, false},
                 {"in-place", 0, 0, 0, true}};
  for (const auto& l : layouts) {
    auto* pa = static_cast<unsigned char*>(da) + l.offA;
    auto* pb = static_cast<unsigned char*>(db) + l.offB;
    auto* pd = l.inPlace ? pa : static_cast<unsigned char*>(dd) + l.offD;
    ASSERT_CUDA(cudaMemcpy(pa, a.data(), n * es, cudaMemcpyHostToDevice));
    ASSERT_CUDA(cudaMemcpy(pb, b.data(), n * es, cudaMemcpyHostToDevice));
    ASSERT_CUDA(dev::launchReduce(pd, pa, pb, n, kc.type, kc.op, nranks, nullptr));
    ASSERT_CUDA(cudaDeviceSynchronize());
    std::vector<unsigned char> got(n * es);
    ASSERT_CUDA(cudaMemcpy(got.data(), pd, n * es, cudaMemcpyDeviceToHost));
    size_t wrong = 0, first = n;
    for (size_t i = 0; i < n; ++i) {
      const unsigned char* g = got.data() + i * es;
      const unsigned char* w = want.data() + i * es;
      if (std::memcmp(g, w, es) == 0) continue;
      if (nanPayloadFree && isNan(kc.type, g) && isNan(kc.type, w)) continue;
      if (!wrong) first = i;
      ++wrong;
    }
    EXPECT_EQ(wrong, 0u) << l.name << ": first at " << first;
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
}

std::vector<KernelCase> allKernelCases() {
  std::vector<KernelCase> v;
  for (int t = 0; t < recclNumTypes; ++t)
    for (int o = 0; o < recclNumOps; ++o) v.push_back({static_cast<recclDataType_t>(t), static_cast<recclRedOp_t>(o)});
  return v;
}

INSTANTIATE_TEST_SUITE_P(EveryTypeAndOp, DeviceKernels, ::testing::ValuesIn(allKernelCases()), [](const auto& tpi) {
  return std::string(reccl::reduce::typeName(tpi.param.type)) + "_" + reccl::reduce::opName(tpi.param.op);
});

// ---------------------------------------------------------------- memory kinds

TEST(DeviceMemory, RealAllocationsAreClassifiedByKind) {
  REQUIRE_DEVICE();
  ASSERT_CUDA(cudaSetDevice(0));
  void *d = nullptr, *pinned = nullptr, *managed = nullptr;
  ASSERT_CUDA(cudaMalloc(&d, 4096));
  ASSERT_CUDA(cudaHostAlloc(&pinned, 4096, cudaHostAllocDefault));
  ASSERT_CUDA(cudaMallocManaged(&managed, 4096));
  // Pages of their own: a registration pins whole pages, and the plain host buffer must not share
  // one with it.
  auto pages = [](size_t n) {
    return std::unique_ptr<char, decltype(&std::free)>(static_cast<char*>(std::aligned_alloc(4096, n)), &std::free);
  };
  auto host = pages(4096), registered = pages(8192);
  ASSERT_TRUE(host && registered);
  ASSERT_CUDA(cudaHostRegister(registered.get(), 8192, cudaHostRegisterDefault));
  EXPECT_TRUE(cuda::anyContextActive());
  struct Case {
    const void* p;
    cuda::MemoryKind kind;
  } cases[] = {{d, cuda::MemoryKind::kDevice},
               {static_cast<char*>(d) + 100, cuda::MemoryKind::kDevice},
               {pinned, cuda::MemoryKind::kPinned},
               {registered.get() + 10, cuda::MemoryKind::kPinned},
               {managed, cuda::MemoryKind::kManaged},
               {host.get(), cuda::MemoryKind::kHost}};
  for (const auto& c : cases) {
    auto r = cuda::classifyPointer(c.p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->kind, c.kind) << cuda::memoryKindName(c.kind) << " classified as " << cuda::memoryKindName(r->kind);
  }
  EXPECT_EQ(cuda::classifyPointer(d)->device, 0);
  cudaHostUnregister(registered.get());
  cudaFree(managed);
  cudaFreeHost(pinned);
  cudaFree(d);
}

// ---------------------------------------------------------------- gate

class Gate : public ::testing::TestWithParam<reccl::stream::GateMode> {};

// The stream stops at the gate until the host opens it, and the counter's wrap-around is a
// cyclic comparison (the gate runs forever).
TEST_P(Gate, HoldsTheStreamUntilOpenedAcrossTheWrap) {
  REQUIRE_DEVICE();
  if (GetParam() == reccl::stream::GateMode::kMemOp && !reccl::stream::StreamGate::memOpAvailable())
    GTEST_SKIP() << "the driver has no cuStreamWaitValue32";
  auto g = reccl::stream::StreamGate::create(GetParam());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto s = cuda::Stream::create();
  ASSERT_TRUE(s.ok());
  auto ev = cuda::Event::create();
  ASSERT_TRUE(ev.ok());
  // However the test ends, the stream passes its gate before the gate's memory goes away (a
  // stream still waiting on freed memory would hang the teardown instead of failing the test).
  struct Release {
    reccl::stream::StreamGate& g;
    cuda::Stream& s;
    ~Release() {
      g.open(g.value() + 0x40000000u);
      cudaStreamSynchronize(s.get());
    }
  } release{*g, *s};
  for (uint32_t base : {0x40u, 0xFFFFFFF0u}) {
    // The counter only moves forward, less than half its range at a time: walk it there by the
    // forward (unsigned) distance, which from 0x60 to 0xFFFFFFF0 is most of the range.
    while (base - g->value() > 0x40000000u) g->open(g->value() + 0x40000000u);
    g->open(base);
    ASSERT_EQ(g->value(), base);
    const uint32_t target = base + 0x20;  // wraps past zero the second time
    ASSERT_TRUE(g->wait(s->get(), target).ok());
    ASSERT_CUDA(cudaEventRecord(ev->get(), s->get()));
    EXPECT_EQ(ev->wait(Deadline::afterMs(200)).code(), Errc::kTimeout) << "the stream passed a closed gate";
    g->open(target - 1);
    EXPECT_EQ(ev->wait(Deadline::afterMs(200)).code(), Errc::kTimeout) << "the stream passed a gate one short";
    g->open(target);
    EXPECT_TRUE(ev->wait(Deadline::afterMs(5000)).ok()) << "the stream did not pass the opened gate";
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, Gate,
                         ::testing::Values(reccl::stream::GateMode::kMemOp, reccl::stream::GateMode::kKernel),
                         [](const auto& tpi) { return std::string(reccl::stream::gateModeName(tpi.param)); });

// ---------------------------------------------------------------- collectives on streams

struct StreamCase {
  int ranks;
  const char* gate;
  const char* chunk;
};

class StreamCollectives : public ::testing::TestWithParam<StreamCase> {};

// Ranks as processes sharing the GPU run every collective on device, pinned, managed and host
// buffers on streams (and device buffers with a NULL stream), each checked bit for bit, cut into
// many pieces by a small staging slot.
TEST_P(StreamCollectives, EveryCollectiveAndPlacementIsBitExact) {
  REQUIRE_DEVICE();
  if (std::string(RECCL_TEST_WORKER_PATH).empty()) GTEST_SKIP() << "built without reccl-bench (RECCL_BUILD_BENCH=OFF)";
  const auto sc = GetParam();
  reccl::test::Workers w;
  uint16_t port = reccl::test::freePort();
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  for (int r = 0; r < sc.ranks; ++r) {
    logs.push_back(::testing::TempDir() + "cuda_worker_" + std::to_string(getpid()) + "_" + std::to_string(r) + ".log");
    pids.push_back(w.spawn(r, sc.ranks, port,
                           {"WORKER_MODE=matrix", std::string("RECCL_CUDA_GATE=") + sc.gate,
                            std::string("RECCL_CUDA_CHUNK_BYTES=") + sc.chunk, "RECCL_CUDA_SLOTS=3"},
                           logs.back()));
    ASSERT_GT(pids.back(), 0);
  }
  // One deadline for all ranks: a hung matrix costs its 240 s once, not once per rank.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  for (int r = 0; r < sc.ranks; ++r) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    int code = w.wait(pids[size_t(r)], std::max(left, std::chrono::milliseconds(0)));
    std::ifstream in(logs[size_t(r)]);
    std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(code, 0) << "rank " << r << " stderr:\n" << log;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, StreamCollectives,
                         ::testing::Values(StreamCase{2, "memop", "65536"}, StreamCase{3, "memop", "262144"},
                                           StreamCase{2, "kernel", "65536"}),
                         [](const auto& tpi) {
                           return std::to_string(tpi.param.ranks) + "ranks_" + tpi.param.gate + "_" +
                                  tpi.param.chunk;
                         });

// A peer that leaves mid-collective: the error reaches recclCommGetAsyncError, the stream is
// released (never left waiting at the gate), and later calls fail.
TEST(StreamErrors, APeerLeavingFailsTheEnqueuedCollectiveAndReleasesTheStream) {
  REQUIRE_DEVICE();
  if (std::string(RECCL_TEST_WORKER_PATH).empty()) GTEST_SKIP() << "built without reccl-bench (RECCL_BUILD_BENCH=OFF)";
  reccl::test::Workers w;
  uint16_t port = reccl::test::freePort();
  std::string log0 = ::testing::TempDir() + "cuda_async_" + std::to_string(getpid()) + ".log";
  pid_t p0 = w.spawn(0, 2, port, {"WORKER_MODE=async-error", "RECCL_TIMEOUT_MS=20000"}, log0);
  pid_t p1 = w.spawn(1, 2, port, {"WORKER_MODE=async-error", "RECCL_TIMEOUT_MS=20000"});
  ASSERT_GT(p0, 0);
  ASSERT_GT(p1, 0);
  EXPECT_EQ(w.wait(p1, std::chrono::seconds(60)), 0);
  int code = w.wait(p0, std::chrono::seconds(90));
  std::ifstream in(log0);
  std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(code, 0) << log;
}

// ---------------------------------------------------------------- IPC pipe

// Starts cuda_ipc_peer with the pipe's descriptors as 3, 4, 5 and the control socket as 6.
pid_t spawnPeer(const cuda::IpcPipe& p, int ctrl, const std::vector<std::string>& args) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p.memFd(), 3);
  posix_spawn_file_actions_adddup2(&fa, p.originWakeFd(), 4);
  posix_spawn_file_actions_adddup2(&fa, p.relayWakeFd(), 5);
  posix_spawn_file_actions_adddup2(&fa, ctrl, 6);
  std::string path = RECCL_CUDA_IPC_PEER_PATH;
  std::vector<std::string> all{path};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, path.c_str(), &fa, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// A pipe of `ringBytes` made here and its relay end in cuda_ipc_peer (args), joined by a control
// socket: `mine` is this end's.
struct PipePair {
  cuda::IpcPipe pipe;
  reccl::UniqueFd mine;
  pid_t peer = -1;
};
reccl::Result<PipePair> startPipe(size_t ringBytes, const std::vector<std::string>& args) {
  PipePair pp;
  if (cudaSetDevice(0) != cudaSuccess) return reccl::Status(Errc::kDevice, "cudaSetDevice(0)");
  RECCL_ASSIGN_OR_RETURN(pp.pipe, cuda::IpcPipe::create(ringBytes));
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return reccl::Status::FromErrno(errno, "socketpair");
  pp.mine.reset(sv[0]);
  reccl::UniqueFd theirs(sv[1]);
  pp.peer = spawnPeer(pp.pipe, theirs.get(), args);
  if (pp.peer <= 0) return reccl::Status(Errc::kSystem, "cannot start cuda_ipc_peer");
  return pp;
}

int waitExit(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// 64 MiB from device memory up through a 1 MiB ring to another process, which forwards it down
// through its own GPU buffer, and back into device memory here: every byte arrives, in order,
// across 64 wraps of each ring.
TEST(IpcPipe, BytesGoUpAndComeBackDownThroughAnotherProcess) {
  REQUIRE_DEVICE();
  const size_t total = 64u << 20;
  auto pp = startPipe(1 << 20, {"echo", std::to_string(total)});
  ASSERT_TRUE(pp.ok()) << pp.status().ToString();
  cuda::IpcPipe* pipe = &pp->pipe;
  const int mine = pp->mine.get();
  const pid_t peer = pp->peer;
  std::vector<uint32_t> pattern(total / 4);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = uint32_t(i * 2654435761u);
  void *src = nullptr, *dst = nullptr;
  ASSERT_CUDA(cudaMalloc(&src, total));
  ASSERT_CUDA(cudaMalloc(&dst, total));
  ASSERT_CUDA(cudaMemcpy(src, pattern.data(), total, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(dst, 0, total));
  ASSERT_CUDA(cudaDeviceSynchronize());  // the memset is on the legacy stream; the pipe's copies are not
  const Deadline d = Deadline::afterMs(60000);
  reccl::Status up;
  std::thread writer([&] { up = pipe->writeAll(pipe->up(), src, total, pipe->originWakeFd(), mine, d); });
  reccl::Status down = pipe->readAll(pipe->down(), dst, total, pipe->originWakeFd(), mine, d);
  writer.join();
  EXPECT_TRUE(up.ok()) << up.ToString();
  EXPECT_TRUE(down.ok()) << down.ToString();
  EXPECT_EQ(waitExit(peer), 0);
  std::vector<uint32_t> back(total / 4);
  ASSERT_CUDA(cudaMemcpy(back.data(), dst, total, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(back == pattern) << "the bytes that came back differ";
  cudaFree(src);
  cudaFree(dst);
}

// The relay loses its rail: the origin's wait ends at once with a link failure (failover then
// migrates the connection again), not at the deadline.
TEST(IpcPipe, ABrokenRelayIsALinkFailureAtOnce) {
  REQUIRE_DEVICE();
  auto pp = startPipe(1 << 16, {"break"});
  ASSERT_TRUE(pp.ok()) << pp.status().ToString();
  EXPECT_EQ(waitExit(pp->peer), 0);
  std::vector<char> buf(4096);
  auto t0 = std::chrono::steady_clock::now();
  reccl::Status s = pp->pipe.readAll(pp->pipe.down(), buf.data(), buf.size(), pp->pipe.originWakeFd(), pp->mine.get(),
                                     Deadline::afterMs(20000));
  EXPECT_EQ(s.code(), Errc::kLinkFailure) << s.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

}  // namespace
