// The CUDA path's parts that need no GPU: the device kernel table and its coverage, pointer
// classification without a device, the piece plan (cut arithmetic, and its pieces run with the
// real host algorithms give the same bits as the direct call), the RECCL_CUDA_* settings, the
// relay pipe choice, the IPC pipe's header checks, and what the API says to a stream without a
// device. They run on every machine of a CUDA build; the GPU's own tests are cuda_device_test.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <set>
#include <vector>

#include "api/comm_access.h"
#include "ccl_test_util.h"
#include "cuda/device_reduce.h"
#include "reccl/common/params.h"
#include "reduce/reduce.h"
#include "stream/cuda_queue.h"
#include "stream/piece_plan.h"
#include "stream/stream_gate.h"
#include "transport/cuda/device_probe.h"
#include "transport/cuda/ipc_pipe.h"
#include "transport/cuda/memory_kind.h"
#include "transport/cuda/relay_pipe_choice.h"

namespace {

using reccl::Errc;
using reccl::algo::CollKind;
using reccl::algo::Collective;
using reccl::test::Comms;
using reccl::test::ScopedEnv;
namespace cuda = reccl::cuda;
namespace stream = reccl::stream;
namespace dev = reccl::reduce::cuda;

// ---------------------------------------------------------------- kernel table

TEST(DeviceKernelTable, EveryTypeAndOpHasAKernelAndNothingElseDoes) {
  for (int t = -1; t <= recclNumTypes; ++t)
    for (int o = -1; o <= recclNumOps; ++o) {
      bool valid = t >= 0 && t < recclNumTypes && o >= 0 && o < recclNumOps;
      auto fn = dev::deviceKernel(static_cast<recclDataType_t>(t), static_cast<recclRedOp_t>(o));
      EXPECT_EQ(fn != nullptr, valid) << "type " << t << " op " << o;
      // The CPU table answers the same pairs.
      EXPECT_EQ(reccl::reduce::kernel(static_cast<recclDataType_t>(t), static_cast<recclRedOp_t>(o)) != nullptr, valid);
    }
}

TEST(DeviceKernelTable, AvgUsesTheSumKernelAndEveryTypeHasADivision) {
  const auto& tab = dev::deviceKernels();
  for (int t = 0; t < recclNumTypes; ++t) {
    auto type = static_cast<recclDataType_t>(t);
    EXPECT_EQ(dev::deviceKernel(type, recclAvg), dev::deviceKernel(type, recclSum)) << reccl::reduce::typeName(type);
    EXPECT_NE(tab.avg[t], nullptr) << reccl::reduce::typeName(type);
    // Every (type, op) is its own kernel: no two pairs share one by mistake.
    std::set<dev::DeviceReduceFn> ops;
    for (int o = 0; o < dev::kDeviceKernelOps; ++o) ops.insert(tab.fn[t][o]);
    EXPECT_EQ(ops.size(), size_t(dev::kDeviceKernelOps)) << reccl::reduce::typeName(type);
  }
}

TEST(DeviceKernelTable, BadArgumentsAreRefusedBeforeAnyLaunch) {
  float x = 0;
  EXPECT_EQ(dev::launchReduce(&x, &x, &x, 1, static_cast<recclDataType_t>(42), recclSum, 1, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(dev::launchReduce(&x, &x, &x, 1, recclFloat32, static_cast<recclRedOp_t>(7), 1, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(dev::launchReduce(&x, &x, &x, 1, recclFloat32, recclAvg, 0, nullptr), cudaErrorInvalidValue);
}

TEST(DeviceKernelTable, VectorPathNeedsOneSharedOffsetThatIsAWholeElement) {
  alignas(64) static char buf[256];
  EXPECT_TRUE(dev::vectorPath(buf, buf + 64, buf + 128, 4));
  EXPECT_TRUE(dev::vectorPath(buf + 4, buf + 68, buf + 132, 4));   // same offset 4: a scalar head, then vectors
  EXPECT_FALSE(dev::vectorPath(buf + 4, buf + 64, buf + 128, 4));  // offsets differ
  EXPECT_FALSE(dev::vectorPath(buf + 2, buf + 66, buf + 130, 4));  // offset inside an element
  EXPECT_TRUE(dev::vectorPath(buf + 2, buf + 66, buf + 130, 2));
}

// ---------------------------------------------------------------- memory kinds

TEST(PointerKind, AttributesMapToKinds) {
  cudaPointerAttributes a{};
  struct Case {
    cudaMemoryType type;
    cuda::MemoryKind kind;
    bool gpuCopy;
  } cases[] = {{cudaMemoryTypeUnregistered, cuda::MemoryKind::kHost, false},
               {cudaMemoryTypeHost, cuda::MemoryKind::kPinned, false},
               {cudaMemoryTypeDevice, cuda::MemoryKind::kDevice, true},
               {cudaMemoryTypeManaged, cuda::MemoryKind::kManaged, true}};
  for (const auto& c : cases) {
    a.type = c.type;
    a.device = 3;
    auto r = cuda::pointerInfoFrom(cudaSuccess, a);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->kind, c.kind) << cuda::memoryKindName(c.kind);
    EXPECT_EQ(cuda::needsGpuCopy(r->kind), c.gpuCopy) << cuda::memoryKindName(c.kind);
    EXPECT_EQ(r->device, c.gpuCopy ? 3 : -1);
  }
}

TEST(PointerKind, NoDriverOrDeviceMeansHostMemoryOtherErrorsAreErrors) {
  cudaPointerAttributes a{};
  for (cudaError_t e : {cudaErrorNoDevice, cudaErrorInsufficientDriver, cudaErrorInvalidValue}) {
    auto r = cuda::pointerInfoFrom(e, a);
    ASSERT_TRUE(r.ok()) << cudaGetErrorName(e);
    EXPECT_EQ(r->kind, cuda::MemoryKind::kHost);
  }
  auto bad = cuda::pointerInfoFrom(cudaErrorIllegalAddress, a);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::kDevice);
  EXPECT_NE(bad.status().message().find("cudaPointerGetAttributes"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("cudaErrorIllegalAddress"), std::string::npos) << bad.status().message();
}

TEST(PointerKind, HostMemoryIsHostWithOrWithoutADevice) {
  std::vector<int> heap(16);
  int stack = 0;
  for (const void* p : {static_cast<const void*>(heap.data()), static_cast<const void*>(&stack), static_cast<const void*>(nullptr)}) {
    auto r = cuda::classifyPointer(p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->kind, cuda::MemoryKind::kHost);
  }
}

TEST(DeviceProbe, WithoutADeviceTheReasonSaysSoAndNoContextIsActive) {
  if (cuda::deviceCount() > 0) {
    EXPECT_TRUE(cuda::noDeviceReason().empty());
    GTEST_SKIP() << "this machine has a CUDA device: the no-device answers are checked where there is none";
  }
  EXPECT_NE(cuda::noDeviceReason().find("no CUDA device"), std::string::npos) << cuda::noDeviceReason();
  EXPECT_FALSE(cuda::anyContextActive());
}

// ---------------------------------------------------------------- piece plan

constexpr int kRanks = 3;

Collective coll(CollKind k, size_t count, recclDataType_t t = recclFloat32, recclRedOp_t op = recclSum, int root = 0) {
  Collective c;
  c.kind = k;
  c.count = count;
  c.dtype = t;
  c.op = op;
  c.root = root;
  c.send = reinterpret_cast<const void*>(uintptr_t{0x1000});
  c.recv = reinterpret_cast<void*>(uintptr_t{0x2000});
  return c;
}

// Bytes each user buffer must see copied, per buffer index, by kind, count and rank.
struct Extents {
  size_t in, out;
};
Extents extents(CollKind k, size_t count, size_t es, int rank, int root) {
  size_t n = count * es, all = count * es * kRanks;
  switch (k) {
    case CollKind::kAllReduce: return {n, n};
    case CollKind::kBroadcast: return {rank == root ? n : 0, n};
    case CollKind::kReduce: return {n, rank == root ? n : 0};
    case CollKind::kAllGather: return {n, all};
    case CollKind::kReduceScatter: return {all, n};
    case CollKind::kAllToAll: return {all, all};
    default: return {0, 0};
  }
}

struct PlanCase {
  CollKind kind;
  size_t count;
  recclDataType_t type;
  size_t slot;
};

class PiecePlan : public ::testing::TestWithParam<PlanCase> {};

// Every byte of every user buffer is copied exactly once, each piece fits its slot, and the
// pieces' counts add up to the call's.
TEST_P(PiecePlan, CopiesEveryByteOnceAndFitsTheSlot) {
  const auto pc = GetParam();
  const size_t es = reccl::reduce::typeSize(pc.type);
  for (int rank = 0; rank < kRanks; ++rank) {
    auto c = coll(pc.kind, pc.count, pc.type, recclSum, 1);
    auto plan = stream::planPieces(c, rank, kRanks, pc.slot);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    Extents want = extents(pc.kind, pc.count, es, rank, 1);
    std::vector<int> seenIn(want.in), seenOut(want.out);
    size_t total = 0;
    for (const auto& p : *plan) {
      total += p.count;
      size_t top = 0;
      for (bool isIn : {true, false})
        for (const auto& cp : isIn ? p.in : p.out) {
          ASSERT_EQ(cp.buffer, isIn ? 0 : 1);
          ASSERT_GE(cp.userPitch, cp.width);
          ASSERT_GE(cp.stagePitch, cp.width);
          ASSERT_EQ(cp.stageOffset % stream::kStageAlign, 0u);
          top = std::max(top, cp.stageOffset + (cp.height - 1) * cp.stagePitch + cp.width);
          auto& seen = isIn ? seenIn : seenOut;
          for (size_t r = 0; r < cp.height; ++r)
            for (size_t b = 0; b < cp.width; ++b) {
              size_t at = cp.userOffset + r * cp.userPitch + b;
              ASSERT_LT(at, seen.size());
              ++seen[at];
            }
        }
      EXPECT_LE(top, pc.slot);
    }
    EXPECT_EQ(total, pc.count) << "rank " << rank;
    for (size_t i = 0; i < seenIn.size(); ++i) ASSERT_EQ(seenIn[i], 1) << "input byte " << i << " rank " << rank;
    for (size_t i = 0; i < seenOut.size(); ++i) ASSERT_EQ(seenOut[i], 1) << "output byte " << i << " rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cuts, PiecePlan,
    ::testing::Values(PlanCase{CollKind::kAllReduce, 1000, recclFloat32, 4096},
                      PlanCase{CollKind::kAllReduce, 1, recclFloat64, 4096},
                      PlanCase{CollKind::kBroadcast, 777, recclFloat16, 1024},
                      PlanCase{CollKind::kReduce, 513, recclInt8, 1024},
                      PlanCase{CollKind::kAllGather, 999, recclFloat32, 4096},
                      PlanCase{CollKind::kReduceScatter, 1001, recclBfloat16, 2048},
                      PlanCase{CollKind::kAllToAll, 300, recclInt64, 8192},
                      PlanCase{CollKind::kAllToAll, 7, recclUint8, 1024}),
    [](const auto& tpi) {
      return std::string(reccl::algo::collKindName(tpi.param.kind)) + "_" +
             reccl::reduce::typeName(tpi.param.type) + "_" + std::to_string(tpi.param.count);
    });

TEST(PiecePlanEdges, NoElementsIsOnePieceWithoutCopies) {
  for (CollKind k : {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kAllToAll, CollKind::kBarrier}) {
    auto plan = stream::planPieces(coll(k, 0), 0, kRanks, 4096);
    ASSERT_TRUE(plan.ok());
    ASSERT_EQ(plan->size(), 1u) << reccl::algo::collKindName(k);
    EXPECT_TRUE((*plan)[0].in.empty() && (*plan)[0].out.empty());
  }
}

TEST(PiecePlanEdges, ASlotTooSmallForOneElementPerRankIsRefusedNamingTheVariable) {
  auto plan = stream::planPieces(coll(CollKind::kAllToAll, 10, recclFloat64), 0, 64, 1024);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Errc::kInvalidUsage);
  EXPECT_NE(plan.status().message().find("RECCL_CUDA_CHUNK_BYTES"), std::string::npos) << plan.status().message();
}

// Rank blocks over 2 GiB apart (a 2-D copy's pitch is capped there): a copy per rank, each one
// row, covering the same bytes as the 2-D copy would, in the same packed slot layout.
TEST(PiecePlanEdges, BlocksFurtherApartThanACopyPitchAreCopiedARowEach) {
  const size_t count = (size_t{1} << 29) + 5;  // floats: a block of 2 GiB + 20 bytes
  const size_t slot = 1 << 20;
  auto plan = stream::planPieces(coll(CollKind::kAllToAll, count), 0, kRanks, slot);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const auto& p = plan->front();
  const size_t pitch = count * 4;
  for (const auto* copies : {&p.in, &p.out}) {
    ASSERT_EQ(copies->size(), static_cast<size_t>(kRanks));
    for (size_t r = 0; r < copies->size(); ++r) {
      const auto& cp = (*copies)[r];
      EXPECT_EQ(cp.height, 1u);
      EXPECT_LE(cp.userPitch, stream::kMaxCopyPitch);
      EXPECT_EQ(cp.userOffset, r * pitch);
      EXPECT_EQ(cp.stageOffset, (*copies)[0].stageOffset + r * cp.width);
    }
  }
  // Below the cap, still one 2-D copy per side.
  auto small = stream::planPieces(coll(CollKind::kAllToAll, 1000), 0, kRanks, slot);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->front().in.size(), 1u);
  EXPECT_EQ(small->front().in.front().height, static_cast<size_t>(kRanks));
}

TEST(PiecePlanEdges, GroupsCutEachOperationAloneSoPeersAgree) {
  // Rank A's group: a send of 5000 floats to B and a receive of 10 halves from C; B's group:
  // only the matching receive. Chunk k of the send and of the receive must meet in round k.
  const size_t slot = 8 * 1024;
  Collective a = coll(CollKind::kSendRecv, 0);
  a.p2p = {{true, 1, nullptr, 5000, recclFloat32}, {false, 2, nullptr, 10, recclFloat16}};
  Collective b = coll(CollKind::kSendRecv, 0);
  b.p2p = {{false, 0, nullptr, 5000, recclFloat32}};
  auto pa = stream::planPieces(a, 0, kRanks, slot);
  auto pb = stream::planPieces(b, 1, kRanks, slot);
  ASSERT_TRUE(pa.ok() && pb.ok());
  ASSERT_EQ(pa->size(), pb->size());
  size_t sent = 0;
  for (size_t k = 0; k < pa->size(); ++k) {
    const auto& sendChunk = (*pa)[k].p2p.front();
    const auto& recvChunk = (*pb)[k].p2p.front();
    EXPECT_TRUE(sendChunk.isSend);
    EXPECT_FALSE(recvChunk.isSend);
    EXPECT_EQ(sendChunk.count, recvChunk.count) << "round " << k;
    sent += sendChunk.count;
  }
  EXPECT_EQ(sent, 5000u);
  EXPECT_EQ((*pa)[0].p2p.size(), 2u);  // the small receive rides in the first round only
  EXPECT_EQ((*pa)[1].p2p.size(), 1u);
}

TEST(PiecePlanEdges, MoreGroupOperationsThanTheSlotHoldsIsRefused) {
  Collective c = coll(CollKind::kSendRecv, 0);
  for (int i = 0; i <= stream::kMaxGroupOps; ++i) c.p2p.push_back({true, 1, nullptr, 4, recclFloat32});
  auto plan = stream::planPieces(c, 0, kRanks, 1 << 20);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Errc::kInvalidUsage);
}

// The pieces, run by the worker's own host part (runPieceOnHost) with the real algorithms on
// ranks as threads, give exactly the bytes of the direct call: what a device collective computes
// once the GPU's copies are done.
struct RunCase {
  CollKind kind;
  recclDataType_t type;
  recclRedOp_t op;
  bool inPlace;
};

class PiecesOnHost : public ::testing::TestWithParam<RunCase> {};

template <typename T>
void fill(std::vector<std::byte>& b, size_t n, int rank) {
  for (size_t i = 0; i < n; ++i) {
    T v = static_cast<T>((rank * 7 + i) % 13);
    std::memcpy(b.data() + i * sizeof(T), &v, sizeof(T));
  }
}

// A collective as the stream layer's worker runs it when every buffer is host memory: its
// pieces, each through runPieceOnHost on one staging slot.
bool runPieces(reccl::core::Comm& impl, const Collective& c, int rank, size_t slot) {
  auto plan = stream::planPieces(c, rank, kRanks, slot);
  if (!plan.ok()) return false;
  std::vector<std::byte> staging(slot);
  auto user = stream::userBuffers(c);
  std::vector<bool> onGpu(user.size(), false);
  for (const auto& p : *plan)
    if (!stream::runPieceOnHost(impl, c, p, user, onGpu, staging.data()).ok()) return false;
  return true;
}

TEST_P(PiecesOnHost, GiveTheDirectCallsBits) {
  const auto rc = GetParam();
  const size_t count = 1000 + 7, slot = 4096;
  const size_t es = reccl::reduce::typeSize(rc.type);
  const size_t total = count * es * kRanks;
  Comms comms(kRanks);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::vector<std::byte>> direct(kRanks), pieced(kRanks);
  for (bool usePieces : {false, true}) {
    auto rcs = comms.run([&](int r, recclComm_t h) -> recclResult_t {
      std::vector<std::byte> send(total), recv(total, std::byte{0xA5});
      if (rc.type == recclFloat32)
        fill<float>(send, total / es, r);
      else
        fill<int32_t>(send, total / es, r);
      Collective c = coll(rc.kind, count, rc.type, rc.op, 1);
      if (rc.op == reccl::reduce::kPreMulSum) {  // each rank's own scalar, exact in the type
        const float fs = 0.5f * float(r + 1);
        const int32_t is = r + 2;
        std::memcpy(c.preMul.value.data(), rc.type == recclFloat32 ? static_cast<const void*>(&fs) : &is, 4);
      }
      c.send = send.data();
      c.recv = rc.inPlace ? send.data() : recv.data();
      if (rc.inPlace && rc.kind == CollKind::kAllGather) c.send = send.data() + size_t(r) * count * es;
      if (rc.inPlace && rc.kind == CollKind::kReduceScatter) c.recv = send.data() + size_t(r) * count * es;
      std::vector<std::byte>& out = rc.inPlace ? send : recv;
      reccl::core::Comm& impl = *reccl::api::commImpl(h);
      if (!usePieces) {
        if (!impl.run([&] { return reccl::algo::run(impl, c); }).ok()) return recclInternalError;
        direct[size_t(r)] = out;
        return recclSuccess;
      }
      if (!runPieces(impl, c, r, slot)) return recclInternalError;
      pieced[size_t(r)] = out;
      return recclSuccess;
    });
    for (auto x : rcs) ASSERT_EQ(x, recclSuccess);
  }
  for (int r = 0; r < kRanks; ++r) {
    if (rc.kind == CollKind::kReduce && r != 1) continue;  // only the root's output is defined
    EXPECT_EQ(direct[size_t(r)], pieced[size_t(r)]) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, PiecesOnHost,
    ::testing::Values(RunCase{CollKind::kAllReduce, recclFloat32, recclSum, false},
                      RunCase{CollKind::kAllReduce, recclInt32, recclMax, true},
                      RunCase{CollKind::kAllReduce, recclFloat32, recclAvg, false},
                      RunCase{CollKind::kBroadcast, recclInt32, recclSum, false},
                      RunCase{CollKind::kReduce, recclFloat32, recclSum, true},
                      RunCase{CollKind::kAllGather, recclInt32, recclSum, false},
                      RunCase{CollKind::kAllGather, recclFloat32, recclSum, true},
                      RunCase{CollKind::kReduceScatter, recclFloat32, recclSum, false},
                      RunCase{CollKind::kReduceScatter, recclInt32, recclMin, true},
                      RunCase{CollKind::kAllToAll, recclInt32, recclSum, false},
                      // Every piece multiplies by the rank's scalar (the direct call's bits).
                      RunCase{CollKind::kAllReduce, recclFloat32, reccl::reduce::kPreMulSum, false},
                      RunCase{CollKind::kReduce, recclInt32, reccl::reduce::kPreMulSum, true},
                      RunCase{CollKind::kReduceScatter, recclInt32, reccl::reduce::kPreMulSum, false}),
    [](const auto& tpi) {
      return std::string(reccl::algo::collKindName(tpi.param.kind)) + "_" +
             reccl::reduce::typeName(tpi.param.type) + "_" + reccl::reduce::opName(tpi.param.op) +
             (tpi.param.inPlace ? "_inplace" : "");
    });

TEST(PiecesOnHostGroup, ARingOfSendsAndReceivesArrivesWhole) {
  const size_t count = 3000, slot = 4096;  // 128 floats per chunk: many rounds
  Comms comms(kRanks);
  ASSERT_TRUE(comms.ok()) << comms.error();
  auto rcs = comms.run([&](int r, recclComm_t h) -> recclResult_t {
    std::vector<float> send(count), recv(count, -1.0f);
    std::iota(send.begin(), send.end(), float(r * 10000));
    Collective c = coll(CollKind::kSendRecv, 0);
    c.p2p = {{true, (r + 1) % kRanks, send.data(), count, recclFloat32},
             {false, (r + kRanks - 1) % kRanks, recv.data(), count, recclFloat32}};
    if (!runPieces(*reccl::api::commImpl(h), c, r, slot)) return recclInternalError;
    int from = (r + kRanks - 1) % kRanks;
    for (size_t i = 0; i < count; ++i)
      if (recv[i] != float(from * 10000 + int(i))) return recclInternalError;
    return recclSuccess;
  });
  for (auto x : rcs) EXPECT_EQ(x, recclSuccess);
}

// ---------------------------------------------------------------- settings

TEST(CudaSettings, GateModeParsing) {
  EXPECT_EQ(stream::parseGateMode("auto", true).value(), stream::GateMode::kMemOp);
  EXPECT_EQ(stream::parseGateMode("auto", false).value(), stream::GateMode::kKernel);
  EXPECT_EQ(stream::parseGateMode("kernel", true).value(), stream::GateMode::kKernel);
  EXPECT_EQ(stream::parseGateMode("memop", true).value(), stream::GateMode::kMemOp);
  auto no = stream::parseGateMode("memop", false);
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.status().code(), Errc::kUnsupported);
  auto bad = stream::parseGateMode("spin", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("RECCL_CUDA_GATE=spin"), std::string::npos);
}

TEST(CudaSettings, QueueOptionsComeFromTheTable) {
  ScopedEnv a("RECCL_CUDA_CHUNK_BYTES", "1M");
  ScopedEnv b("RECCL_CUDA_SLOTS", "6");
  ScopedEnv c("RECCL_CUDA_GATE", "kernel");
  auto o = stream::QueueOptions::fromEnv();
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->slotBytes, size_t(1) << 20);
  EXPECT_EQ(o->slots, 6);
  EXPECT_EQ(o->gate, stream::GateMode::kKernel);
}

TEST(CudaSettings, OutOfRangeValuesAreRefusedNamingTheVariable) {
  struct Bad {
    const char* env;
    const char* value;
  } bad[] = {{"RECCL_CUDA_CHUNK_BYTES", "1K"}, {"RECCL_CUDA_CHUNK_BYTES", "100000"}, {"RECCL_CUDA_SLOTS", "1"},
             {"RECCL_CUDA_GATE", "spin"}, {"RECCL_CUDA_RELAY", "nvlink"},
             // The relay route carries host slots through shared memory: a forced CUDA IPC pipe
             // is refused, never quietly replaced.
             {"RECCL_CUDA_RELAY", "ipc"}};
  for (const auto& x : bad) {
    ScopedEnv e(x.env, x.value);
    auto s = reccl::params::validateAll();
    ASSERT_FALSE(s.ok()) << x.env << "=" << x.value;
    EXPECT_NE(s.message().find(x.env), std::string::npos) << s.message();
  }
}

TEST(RelayPipeChoice, SameRoutingPolicyOnlyTheMediumDiffers) {
  using K = cuda::RelayPipeKind;
  struct Case {
    const char* setting;
    cuda::RelayPipeEnds ends;
    bool ok;
    K kind;
  } cases[] = {
      {"auto", {true, true, true}, true, K::kCudaIpc},
      {"auto", {true, true, false}, true, K::kSharedMemory},
      {"auto", {false, true, true}, true, K::kSharedMemory},
      {"auto", {true, false, true}, true, K::kSharedMemory},
      {"shm", {true, true, true}, true, K::kSharedMemory},
      {"ipc", {true, true, true}, true, K::kCudaIpc},
      {"ipc", {true, true, false}, false, K::kSharedMemory},
      {"ipc", {false, false, false}, false, K::kSharedMemory},
      {"nvlink", {true, true, true}, false, K::kSharedMemory},
  };
  for (const auto& c : cases) {
    auto r = cuda::chooseRelayPipe(c.setting, c.ends);
    ASSERT_EQ(r.ok(), c.ok) << c.setting;
    if (c.ok) EXPECT_EQ(*r, c.kind) << c.setting << " -> " << cuda::relayPipeKindName(*r);
    else EXPECT_NE(r.status().message().find("RECCL_CUDA_RELAY"), std::string::npos) << r.status().message();
  }
}

// ---------------------------------------------------------------- IPC pipe header

TEST(IpcPipeHeader, ForeignOrDamagedHeadersAreRefusedBeforeAnyCudaCall) {
  const uint32_t magic = cuda::kIpcPipeMagic, ring = 1 << 20;
  const size_t bytes = cuda::kIpcPipeHeaderBytes;
  EXPECT_TRUE(cuda::IpcPipe::checkHeader(magic, ring, bytes).ok());
  EXPECT_EQ(cuda::IpcPipe::checkHeader(magic, ring, 8192).code(), Errc::kProtocol);
  EXPECT_EQ(cuda::IpcPipe::checkHeader(0x50594c52, ring, bytes).code(), Errc::kProtocol);  // the shm pipe's magic
  EXPECT_EQ(cuda::IpcPipe::checkHeader(magic, 3u << 20, bytes).code(), Errc::kProtocol);
  EXPECT_EQ(cuda::IpcPipe::checkHeader(magic, 4096, bytes).code(), Errc::kProtocol);
}

TEST(IpcPipeHeader, AttachRefusesAMemfdOfTheWrongSize) {
  reccl::UniqueFd mem(memfd_create("cuda-unit", MFD_CLOEXEC));
  ASSERT_TRUE(mem);
  ASSERT_EQ(ftruncate(mem.get(), 64 * 1024), 0);
  auto r = cuda::IpcPipe::attach(std::move(mem), reccl::UniqueFd(), reccl::UniqueFd());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::kProtocol) << r.status().ToString();
}

TEST(IpcPipeHeader, CreateWithoutADeviceSaysSo) {
  if (cuda::deviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device (cuda_device_test covers the pipe)";
  auto r = cuda::IpcPipe::create(1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::kUnsupported);
  EXPECT_NE(r.status().message().find("no CUDA device"), std::string::npos) << r.status().message();
}

// ---------------------------------------------------------------- the API without a device

TEST(CudaApi, AStreamWithoutADeviceIsAnInvalidArgumentNamingIt) {
  if (cuda::deviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device (cuda_device_test covers streams)";
  Comms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  float x[4] = {1, 2, 3, 4};
  auto fake = reinterpret_cast<recclStream_t>(uintptr_t{0x1234});
  EXPECT_EQ(recclAllReduce(x, x, 4, recclFloat32, recclSum, comms[0], fake), recclInvalidArgument);
  std::string msg = recclGetLastError(comms[0]);
  EXPECT_NE(msg.find("stream"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no CUDA device"), std::string::npos) << msg;
  // The communicator is untouched: host calls with a NULL stream still work.
  auto rcs = comms.run([&](int, recclComm_t c) {
    float y[4] = {1, 2, 3, 4};
    recclResult_t r = recclAllReduce(y, y, 4, recclFloat32, recclSum, c, nullptr);
    return r == recclSuccess && y[3] == 8.0f ? recclSuccess : recclInternalError;
  });
  for (auto r : rcs) EXPECT_EQ(r, recclSuccess);
  recclResult_t async = recclSuccess;
  EXPECT_EQ(recclCommGetAsyncError(comms[0], &async), recclSuccess);
  EXPECT_EQ(async, recclSuccess);
}

}  // namespace
