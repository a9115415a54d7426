// NCCL's API as reccl offers it: recclCommInitRankConfig with a versioned config and non-blocking
// init, recclCommSplit, recclCommFinalize, recclBcast, recclAlltoAll (and its old spelling),
// recclGather and recclScatter, recclGetUniqueId + recclCommInitRank across processes, buffer
// registration and windows, recclMemAlloc and recclCommCuDevice. Ranks are threads unless said otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <cstdio>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/comm_access.h"
#include "bench_child.h"
#include "ccl_test_util.h"
#include "reccl/common/log.h"
#include "reccl/reccl.h"
#include "reccl/reccl.hpp"
#if RECCL_HAVE_CUDA
#include "transport/cuda/device_probe.h"
#endif

namespace reccl::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Polls recclCommGetAsyncError until it is not recclInProgress (or the deadline passed: then
// recclInProgress is returned).
recclResult_t waitReady(recclComm_t comm, milliseconds limit) {
  auto until = Clock::now() + limit;
  recclResult_t state = recclInProgress;
  while (Clock::now() < until) {
    if (recclCommGetAsyncError(comm, &state) != recclSuccess) return recclInternalError;
    if (state != recclInProgress) return state;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return recclInProgress;
}

recclConfig_t nonBlocking() {
  recclConfig_t c = RECCL_CONFIG_INITIALIZER;
  c.blocking = 0;
  return c;
}

struct BadConfig {
  const char* name;
  void (*spoil)(recclConfig_t*);
  const char* mentions;
};

class ConfigIsChecked : public ::testing::TestWithParam<BadConfig> {};

TEST_P(ConfigIsChecked, BeforeAnythingStartsAndNamesTheField) {
  recclUniqueId id;
  ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
  recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
  GetParam().spoil(&cfg);
  recclComm_t comm = reinterpret_cast<recclComm_t>(0x1);
  EXPECT_EQ(recclCommInitRankConfig(&comm, 2, id, 0, &cfg), recclInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(recclGetLastError(nullptr)).find(GetParam().mentions), std::string::npos)
      << recclGetLastError(nullptr);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ConfigIsChecked,
    ::testing::Values(BadConfig{"Magic", [](recclConfig_t* c) { c->magic = 0; }, "RECCL_CONFIG_INITIALIZER"},
                      BadConfig{"Size", [](recclConfig_t* c) { c->size = 8; }, "config.size"},
                      BadConfig{"Blocking", [](recclConfig_t* c) { c->blocking = 2; }, "config.blocking"},
                      BadConfig{"Channels", [](recclConfig_t* c) { c->nChannels = 17; }, "config.nChannels"},
                      BadConfig{"Timeout", [](recclConfig_t* c) { c->timeoutMs = 0; }, "config.timeoutMs"},
                      BadConfig{"BootTimeout", [](recclConfig_t* c) { c->bootstrapTimeoutMs = -5; },
                                "config.bootstrapTimeoutMs"}),
    [](const auto& test) { return std::string(test.param.name); });

TEST(NcclApi, ConfigInitializerIsVersioned) {
  recclConfig_t c = RECCL_CONFIG_INITIALIZER;
  EXPECT_EQ(c.size, sizeof(recclConfig_t));
  EXPECT_EQ(c.magic, RECCL_CONFIG_MAGIC);
  EXPECT_EQ(c.version, static_cast<unsigned>(RECCL_VERSION_CODE));
  EXPECT_EQ(c.blocking, RECCL_CONFIG_UNDEF_INT);
  EXPECT_EQ(c.commName, nullptr);
}

TEST(NcclApi, NonBlockingInitReportsProgressThenTheCommunicatorWorks) {
  const int n = 3;
  recclUniqueId id;
  ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
  std::vector<recclComm_t> comms(n, nullptr);
  // Ranks 0 and 1 start now; each returns recclInProgress at once, and cannot finish while rank 2
  // has not joined: they are seen in progress and refusing work.
  for (int r = 0; r < 2; ++r) {
    recclConfig_t cfg = nonBlocking();
    cfg.commName = "nb";
    ASSERT_EQ(recclCommInitRankConfig(&comms[r], n, id, r, &cfg), recclInProgress) << recclGetLastError(nullptr);
    ASSERT_NE(comms[r], nullptr);
  }
  recclResult_t state = recclSuccess;
  ASSERT_EQ(recclCommGetAsyncError(comms[0], &state), recclSuccess);
  EXPECT_EQ(state, recclInProgress);
  float x = 1;
  EXPECT_EQ(recclAllReduce(&x, &x, 1, recclFloat32, recclSum, comms[0], nullptr), recclInvalidUsage);
  EXPECT_NE(std::string(recclGetLastError(nullptr)).find("recclCommGetAsyncError"), std::string::npos);
  recclConfig_t cfg = nonBlocking();
  ASSERT_EQ(recclCommInitRankConfig(&comms[2], n, id, 2, &cfg), recclInProgress);
  for (int r = 0; r < n; ++r) ASSERT_EQ(waitReady(comms[r], milliseconds(30000)), recclSuccess) << "rank " << r;
  std::vector<recclResult_t> rcs(n);
  std::vector<float> out(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      float v = static_cast<float>(r + 1);
      rcs[r] = recclAllReduce(&v, &out[r], 1, recclFloat32, recclSum, comms[r], nullptr);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(rcs[r], recclSuccess);
    EXPECT_EQ(out[r], 6.0f);
  }
  for (auto c : comms) EXPECT_EQ(recclCommDestroy(c), recclSuccess);
}

TEST(NcclApi, NonBlockingInitThatCannotFinishReportsItsError) {
  recclUniqueId id;
  ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
  recclConfig_t cfg = nonBlocking();
  cfg.bootstrapTimeoutMs = 300;  // rank 1 never comes
  recclComm_t comm = nullptr;
  ASSERT_EQ(recclCommInitRankConfig(&comm, 2, id, 0, &cfg), recclInProgress);
  EXPECT_EQ(waitReady(comm, milliseconds(20000)), recclTimeout);
  EXPECT_NE(std::string(recclGetLastError(nullptr)).find("rank 0 init"), std::string::npos) << recclGetLastError(nullptr);
  int count = 0;
  EXPECT_EQ(recclCommCount(comm, &count), recclTimeout);
  EXPECT_EQ(recclCommDestroy(comm), recclSuccess);
}

// recclCommDestroy waits for a pending init as long as the communicator's own deadlines allow,
// not the environment's: the init below may take 11 s where the environment says 0.1 s.
TEST(NcclApi, DestroyWaitsOutAPendingInitByTheCommunicatorsConfig) {
  recclUniqueId id;
  ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);  // its root keeps the default deadline
  ScopedEnv boot("RECCL_BOOTSTRAP_TIMEOUT_MS", "100");
  ScopedEnv coll("RECCL_TIMEOUT_MS", "100");
  recclConfig_t cfg = nonBlocking();
  cfg.bootstrapTimeoutMs = 11000;  // past the environment's limit + destroy's 10 s grace; rank 1 never comes
  recclComm_t comm = nullptr;
  ASSERT_EQ(recclCommInitRankConfig(&comm, 2, id, 0, &cfg), recclInProgress);
  EXPECT_EQ(recclCommDestroy(comm), recclSuccess) << recclGetLastError(nullptr);
}

// A rank may join as late as the communicator's config allows, past the environment's bootstrap
// timeout that recclGetUniqueId's root was started with: the root waits while a rank that joined
// waits for it (as torch's process groups need: their timeout reaches every rank's init).
TEST(NcclApi, ARankLaterThanTheRootsDeadlineJoinsWithinTheConfigsTimeout) {
  ScopedEnv boot("RECCL_BOOTSTRAP_TIMEOUT_MS", "500");  // the root's deadline: 0.5 s + 1 s grace
  recclUniqueId id;
  ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
  recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
  cfg.bootstrapTimeoutMs = 20000;
  recclComm_t comms[2] = {nullptr, nullptr};
  recclResult_t rc0 = recclInternalError;
  std::thread first([&] { rc0 = recclCommInitRankConfig(&comms[0], 2, id, 0, &cfg); });
  std::this_thread::sleep_for(milliseconds(2500));  // late: past the root's own deadline
  recclResult_t rc1 = recclCommInitRankConfig(&comms[1], 2, id, 1, &cfg);
  std::string why1 = recclGetLastError(nullptr);
  first.join();
  EXPECT_EQ(rc0, recclSuccess);
  EXPECT_EQ(rc1, recclSuccess) << why1;
  if (rc0 == recclSuccess && rc1 == recclSuccess) {
    int32_t in[2] = {1, 2}, out[2] = {0, 0};
    recclResult_t rcs[2] = {recclInternalError, recclInternalError};
    std::thread other([&] { rcs[0] = recclAllReduce(&in[0], &out[0], 1, recclInt32, recclSum, comms[0], nullptr); });
    rcs[1] = recclAllReduce(&in[1], &out[1], 1, recclInt32, recclSum, comms[1], nullptr);
    other.join();
    EXPECT_EQ(rcs[0], recclSuccess);
    EXPECT_EQ(rcs[1], recclSuccess);
    EXPECT_EQ(out[0], 3);
    EXPECT_EQ(out[1], 3);
  }
  std::thread destroyFirst([&] {
    if (comms[0]) recclCommDestroy(comms[0]);
  });
  if (comms[1]) recclCommDestroy(comms[1]);
  destroyFirst.join();
}

TEST(NcclApi, AbortDuringNonBlockingInitReturnsAtOnce) {
  recclUniqueId id;
  ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
  recclConfig_t cfg = nonBlocking();
  cfg.bootstrapTimeoutMs = 3000;
  recclComm_t comm = nullptr;
  ASSERT_EQ(recclCommInitRankConfig(&comm, 2, id, 0, &cfg), recclInProgress);
  auto t0 = Clock::now();
  EXPECT_EQ(recclCommAbort(comm), recclSuccess);
  EXPECT_LT(Clock::now() - t0, milliseconds(1000));
}

// Threads of this process that a running non-blocking init holds: its own ("reccl-init") and the
// progress engine it starts before the bootstrap ("reccl-progress"). Other tests' communicators
// are gone by now; their bootstrap roots may still be ending, so those are not counted.
size_t initThreads() {
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream f(e.path() / "comm");
    std::string name;
    std::getline(f, name);
    n += name == "reccl-init" || name == "reccl-progress";
  }
  return n;
}

// The aborted init stops waiting for the rank that never comes (the bootstrap root's table) at
// once, not at its 30 s bootstrap deadline: its thread and the progress engine it started end
// (and its sockets close) within a second of the abort.
TEST(NcclApi, AnAbortedNonBlockingInitEndsItsThreadsAtOnce) {
  recclUniqueId id;
  ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
  recclConfig_t cfg = nonBlocking();
  cfg.bootstrapTimeoutMs = 30000;
  // An init aborted by the test before this one may still be ending.
  for (auto t = Clock::now(); initThreads() > 0 && Clock::now() - t < std::chrono::seconds(5);)
    std::this_thread::sleep_for(milliseconds(10));
  const size_t before = initThreads();
  recclComm_t comm = nullptr;
  ASSERT_EQ(recclCommInitRankConfig(&comm, 2, id, 0, &cfg), recclInProgress);
  std::this_thread::sleep_for(milliseconds(300));  // in the root's wait for rank 1
  EXPECT_EQ(initThreads(), before + 2);
  auto t0 = Clock::now();
  ASSERT_EQ(recclCommAbort(comm), recclSuccess);
  while (initThreads() > before && Clock::now() - t0 < std::chrono::seconds(5))
    std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(initThreads(), before) << "the aborted init still runs "
                                      << std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count()
                                      << " ms after the abort";
  EXPECT_LT(Clock::now() - t0, milliseconds(1000));
}

TEST(NcclApi, SplitGroupsByColorAndOrdersByKey) {
  const int n = 5;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<recclComm_t> child(n, nullptr);
  auto rcs = world.run([&](int r, recclComm_t c) {
    // Colors: 0 for even ranks, 1 for odd, none for rank 4; keys reverse the order.
    int color = r == 4 ? RECCL_SPLIT_NOCOLOR : r % 2;
    return recclCommSplit(c, color, -r, &child[r], nullptr);
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << recclGetLastError(nullptr);
  EXPECT_EQ(child[4], nullptr);
  // Even {0, 2} -> new ranks {1, 0}; odd {1, 3} -> {1, 0}.
  const int wantRank[] = {1, 1, 0, 0};
  std::vector<int32_t> gathered(n * 2, -1);
  std::vector<std::thread> ts;
  std::vector<recclResult_t> crc(4, recclSuccess);
  for (int r = 0; r < 4; ++r)
    ts.emplace_back([&, r] {
      int rank = -1, count = 0;
      recclCommUserRank(child[r], &rank);
      recclCommCount(child[r], &count);
      EXPECT_EQ(rank, wantRank[r]) << "parent rank " << r;
      EXPECT_EQ(count, 2);
      int32_t mine = r;
      crc[r] = recclAllGather(&mine, &gathered[2 * r], 1, recclInt32, child[r], nullptr);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(crc[r], recclSuccess);
    // New rank 0 of the even group is parent rank 2: the gather lists parent ranks by new rank.
    const int32_t want0 = r % 2 == 0 ? 2 : 3, want1 = r % 2 == 0 ? 0 : 1;
    EXPECT_EQ(gathered[2 * r], want0) << "parent rank " << r;
    EXPECT_EQ(gathered[2 * r + 1], want1) << "parent rank " << r;
  }
  for (int r = 0; r < 4; ++r) EXPECT_EQ(recclCommDestroy(child[r]), recclSuccess);
}

TEST(NcclApi, SplitRefusesBadArgumentsOnEveryRank) {
  Comms world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  recclComm_t child = nullptr;
  EXPECT_EQ(recclCommSplit(world[0], -7, 0, &child, nullptr), recclInvalidArgument);
  EXPECT_NE(std::string(recclGetLastError(nullptr)).find("color"), std::string::npos);
  // A bad config on one rank fails the split on both, naming it on that rank, none waits.
  std::vector<recclComm_t> kids(2, nullptr);
  std::vector<std::string> errs(2);
  auto rcs = world.run([&](int r, recclComm_t c) {
    recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
    if (r == 1) cfg.nChannels = 99;
    recclResult_t rc = recclCommSplit(c, 0, r, &kids[r], &cfg);
    errs[r] = recclGetLastError(nullptr);
    return rc;
  });
  EXPECT_EQ(rcs[1], recclInvalidArgument);
  EXPECT_NE(errs[1].find("config.nChannels"), std::string::npos) << errs[1];
  EXPECT_EQ(rcs[0], recclInvalidUsage);
  EXPECT_NE(errs[0].find("rank 1"), std::string::npos) << errs[0];
  EXPECT_EQ(kids[0], nullptr);
  EXPECT_EQ(kids[1], nullptr);
}

TEST(NcclApi, FinalizeIsCollectiveThenOnlyDestroyFollows) {
  for (int blocking : {1, 0}) {
    const int n = 3;
    recclUniqueId id;
    ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
    std::vector<recclComm_t> comms(n, nullptr);
    std::vector<recclResult_t> rcs(n);
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r)
      ts.emplace_back([&, r] {
        recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
        cfg.blocking = blocking;
        rcs[r] = recclCommInitRankConfig(&comms[r], n, id, r, &cfg);
        if (rcs[r] == recclInProgress) rcs[r] = waitReady(comms[r], milliseconds(30000));
        if (rcs[r] != recclSuccess) return;
        rcs[r] = recclCommFinalize(comms[r]);
        if (rcs[r] == recclInProgress) rcs[r] = waitReady(comms[r], milliseconds(30000));
      });
    for (auto& t : ts) t.join();
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(rcs[r], recclSuccess) << "blocking " << blocking << " rank " << r;
      float x = 1;
      EXPECT_EQ(recclAllReduce(&x, &x, 1, recclFloat32, recclSum, comms[r], nullptr), recclInvalidUsage);
      EXPECT_NE(std::string(recclGetLastError(nullptr)).find("finalized"), std::string::npos);
      int rank = -1;
      EXPECT_EQ(recclCommUserRank(comms[r], &rank), recclSuccess);  // still readable
      EXPECT_EQ(rank, r);
      EXPECT_EQ(recclCommDestroy(comms[r]), recclSuccess);
    }
  }
}

TEST(NcclApi, BcastAndBothAlltoAllSpellings) {
  const int n = 3;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  const size_t count = 1001;
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    std::vector<int32_t> buf(count);
    std::iota(buf.begin(), buf.end(), r * 10000);
    if (recclResult_t rc = recclBcast(buf.data(), count, recclInt32, 1, c, nullptr); rc != recclSuccess) return rc;
    for (size_t i = 0; i < count; ++i)
      if (buf[i] != static_cast<int32_t>(10000 + i)) return recclInternalError;  // rank 1's data everywhere
    std::vector<int32_t> send(count * n), a(count * n), b(count * n);
    for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<int32_t>(r * 1000000 + i);
    if (recclResult_t rc = recclAlltoAll(send.data(), a.data(), count, recclInt32, c, nullptr); rc != recclSuccess)
      return rc;
    if (recclResult_t rc = recclAllToAll(send.data(), b.data(), count, recclInt32, c, nullptr); rc != recclSuccess)
      return rc;
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < count; ++i)
        if (a[p * count + i] != static_cast<int32_t>(p * 1000000 + r * count + i)) return recclInternalError;
    return a == b ? recclSuccess : recclInternalError;
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(rcs[r], recclSuccess) << "rank " << r;
}

// recclGather and recclScatter (NCCL 2.28's ncclGather/ncclScatter): alone, and inside a group
// beside other sends and receives on the same connections, which they join as NCCL's do; a
// non-root rank's unused buffer may be null; bad arguments are refused naming the argument.
TEST(NcclApi, GatherAndScatterAloneAndInAGroup) {
  const int n = 3, root = 2;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  const size_t count = 70001;  // several steps of the default chunk
  std::vector<std::string> errs(n);
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    std::vector<int32_t> mine(count), all(r == root ? count * n : 0), back(count), ring(count), ringIn(count);
    for (size_t i = 0; i < count; ++i) mine[i] = static_cast<int32_t>(r * 1000000 + i);
    if (recclResult_t rc = recclGather(mine.data(), all.data(), count, recclInt32, root, c, nullptr); rc) return rc;
    if (r == root) {
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i)
          if (all[p * count + i] != static_cast<int32_t>(p * 1000000 + i)) {
            errs[r] = "gather: block " + std::to_string(p) + " element " + std::to_string(i);
            return recclInternalError;
          }
      for (auto& v : all) v += 7;  // scattered back, changed
    }
    // In one group: the scatter, and a ring shift on the connections the scatter also uses.
    std::iota(ringIn.begin(), ringIn.end(), r * 10);
    if (recclResult_t rc = recclGroupStart(); rc) return rc;
    recclResult_t a = recclScatter(r == root ? all.data() : nullptr, back.data(), count, recclInt32, root, c, nullptr);
    recclResult_t b = recclSend(ringIn.data(), count, recclInt32, (r + 1) % n, c, nullptr);
    recclResult_t d = recclRecv(ring.data(), count, recclInt32, (r + n - 1) % n, c, nullptr);
    if (recclResult_t rc = recclGroupEnd(); rc) return rc;
    if (a || b || d) return a ? a : b ? b : d;
    for (size_t i = 0; i < count; ++i) {
      if (back[i] != static_cast<int32_t>(r * 1000000 + i + 7)) {
        errs[r] = "scatter: element " + std::to_string(i);
        return recclInternalError;
      }
      if (ring[i] != static_cast<int32_t>(((r + n - 1) % n) * 10 + i)) {
        errs[r] = "ring shift beside the scatter: element " + std::to_string(i);
        return recclInternalError;
      }
    }
    return recclSuccess;
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << errs[r];

  // Refused on one rank before anything is sent (nothing reaches the others).
  recclComm_t c = world[0];
  int32_t x[8] = {};
  auto refused = [&](recclResult_t rc, const char* needle, const char* what) {
    EXPECT_EQ(rc, recclInvalidArgument) << what;
    EXPECT_NE(std::string(recclGetLastError(nullptr)).find(needle), std::string::npos)
        << what << ": " << recclGetLastError(nullptr);
  };
  refused(recclGather(x, x, 1, recclInt32, n, c, nullptr), "root: 3 is not in [0, 3)", "gather root");
  refused(recclScatter(x, x, 1, recclInt32, -1, c, nullptr), "root: -1", "scatter root");
  refused(recclGather(nullptr, x, 1, recclInt32, 0, c, nullptr), "sendbuff: null", "gather sendbuff");
  refused(recclGather(x, nullptr, 1, recclInt32, 0, c, nullptr), "recvbuff: null", "gather recvbuff at root");
  refused(recclScatter(nullptr, x, 1, recclInt32, 0, c, nullptr), "sendbuff: null", "scatter sendbuff at root");
  refused(recclScatter(x, nullptr, 1, recclInt32, 1, c, nullptr), "recvbuff: null", "scatter recvbuff");
  refused(recclGather(x, x, SIZE_MAX / 8, recclInt32, 0, c, nullptr), "overflow", "gather count");
}

// `n` ranks as threads, each with a reccl::Communicator of one new id, running body(rank, comm,
// err), which appends to err what went wrong; each rank's err.
std::vector<std::string> runCxxRanks(int n, const std::function<void(int, reccl::Communicator&, std::string&)>& body) {
  std::vector<std::string> errs(n);
  recclUniqueId id;
  if (recclGetUniqueId(&id) != recclSuccess) {
    errs[0] = "recclGetUniqueId: " + std::string(recclGetLastError(nullptr));
    return errs;
  }
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      reccl::Communicator c;
      if (recclResult_t rc = reccl::Communicator::init(&c, n, id, r); rc) {
        errs[r] = std::string("init: ") + recclGetErrorString(rc);
        return;
      }
      body(r, c, errs[r]);
    });
  for (auto& t : ranks) t.join();
  return errs;
}

// The C++ layer's gather and scatter (reccl.hpp): spans of the element type, the root's block
// count checked against the rank count before anything is sent.
TEST(NcclApi, CxxGatherAndScatterTakeSpans) {
  const int n = 3, root = 1;
  auto errs = runCxxRanks(n, [&](int r, reccl::Communicator& c, std::string& err) {
    std::vector<int32_t> mine(5, r * 10), all(r == root ? 5 * n : 0), back(5, -1);
    if (r == root && c.gather<int32_t>(mine, std::span<int32_t>(all).first(5 * n - 1), root) != recclInvalidArgument)
      err = "a gather into a recv span of the wrong size was not refused";
    if (recclResult_t rc = c.gather<int32_t>(mine, all, root); rc) err += std::string(" gather: ") + recclGetErrorString(rc);
    for (int p = 0; r == root && p < n; ++p)
      if (all[5 * p + 4] != p * 10) err += " gather: block " + std::to_string(p) + " wrong";
    for (auto& v : all) v += 1;
    if (recclResult_t rc = c.scatter<int32_t>(all, back, root); rc) err += std::string(" scatter: ") + recclGetErrorString(rc);
    if (back != std::vector<int32_t>(5, r * 10 + 1)) err += " scatter: got " + std::to_string(back[0]);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
}

// A program's own 16-bit float, given its reccl type as reccl.hpp says.
struct Bf16 {
  uint16_t bits;
};

}  // namespace
}  // namespace reccl::test

template <>
constexpr recclDataType_t reccl::dataTypeOf<reccl::test::Bf16>() {
  return recclBfloat16;
}

namespace reccl::test {
namespace {

// The rest of the C++ layer: reduce, reduce-scatter, all-to-all, sends and receives in a
// reccl::Group (also one ended by its destructor), a Registration and a Window that end once, and
// what the layer refuses itself named by reccl::lastError() until a C call fails after it.
TEST(NcclApi, CxxLayerCoversTheCallsAndNamesWhatItRefuses) {
  const int n = 3, root = 2;
  auto errs = runCxxRanks(n, [&](int r, reccl::Communicator& c, std::string& err) {
    auto check = [&](recclResult_t rc, const char* what) {
      if (rc != recclSuccess) err += std::string(" ") + what + ": " + recclGetErrorString(rc) + " " + reccl::lastError();
      return rc == recclSuccess;
    };
    const size_t k = 7;
    std::vector<int32_t> mine(k), red(r == root ? k : 0);
    for (size_t i = 0; i < k; ++i) mine[i] = static_cast<int32_t>((r + 1) * 100 + i);
    if (check(c.reduce<int32_t>(mine, red, recclSum, root), "reduce"))
      for (size_t i = 0; r == root && i < k; ++i)
        if (red[i] != static_cast<int32_t>(600 + 3 * i)) err += " reduce: element " + std::to_string(i);

    // Block b of every rank's send is reduced into rank b's recv.
    std::vector<float> blocks(k * n), part(k, -1);
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<float>(r * 1000 + i);
    if (check(c.reduceScatter<float>(blocks, part, recclMax), "reduceScatter"))
      for (size_t i = 0; i < k; ++i)
        if (part[i] != static_cast<float>(2000 + r * k + i)) err += " reduceScatter: element " + std::to_string(i);

    std::vector<int64_t> out(k * n), in(k * n, -1);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(r * 1000 + i);
    if (check(c.allToAll<int64_t>(out, in), "allToAll"))
      for (int p = 0; p < n; ++p)
        if (in[p * k] != static_cast<int64_t>(p * 1000 + r * k)) err += " allToAll: block " + std::to_string(p);

    // A ring shift in a group; the second one's group is ended by its Group's destructor.
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    for (int round = 0; round < 2; ++round) {
      std::vector<uint8_t> give(k, static_cast<uint8_t>(10 * r + round)), got(k, 0xff);
      {
        reccl::Group g;
        if (!check(g.start(), "group start")) return;
        check(c.send<uint8_t>(give, next), "send");
        check(c.recv<uint8_t>(got, prev), "recv");
        if (round == 0) check(g.end(), "group end");
      }
      if (got != std::vector<uint8_t>(k, static_cast<uint8_t>(10 * prev + round)))
        err += " ring shift " + std::to_string(round) + ": got " + std::to_string(got[0]);
    }

    std::vector<double> x(k, r + 1.0), y(k, 0);
    void* regHandle = nullptr;
    recclWindow_t winHandle = nullptr;
    {
      reccl::Registration reg;
      reccl::Window win;
      if (!check(reccl::Registration::make(&reg, c, x.data(), k * sizeof(double)), "register")) return;
      if (!check(reccl::Window::make(&win, c, y.data(), k * sizeof(double)), "window")) return;
      reccl::Registration moved(std::move(reg));
      regHandle = moved.get();
      winHandle = win.get();
      if (reg || !moved || !win) err += " handles after the move";
      if (check(c.allReduce<double>(x, y, recclSum), "allReduce on registered memory") && y[k - 1] != 6.0)
        err += " allReduce: " + std::to_string(y[k - 1]);
      // bfloat16 1.0 (0x3f80) from each rank: 3.0 (0x4040).
      std::vector<Bf16> one(k, Bf16{0x3f80}), three(k, Bf16{0});
      if (check(c.allReduce<Bf16>(one, three, recclSum), "allReduce of a specialized type") && three[0].bits != 0x4040)
        err += " bfloat16 sum: " + std::to_string(three[0].bits);
      check(win.reset(), "window end");  // collective: every rank here
      if (win) err += " a window still held after its end";
    }  // the registration ends here
    if (recclCommDeregister(c.get(), regHandle) != recclInvalidArgument) err += " the registration outlived its scope";
    if (recclCommWindowDeregister(c.get(), winHandle) != recclInvalidArgument) err += " the window was not ended";

    // Refusals of the layer itself: one rank, nothing sent.
    if (r == 0) {
      std::vector<float> four(4), three(3);
      auto refused = [&](recclResult_t rc, const std::string& needle, const char* what) {
        if (rc != recclInvalidArgument) err += std::string(" ") + what + " not refused";
        else if (reccl::lastError().find(needle) == std::string::npos) err += std::string(" ") + what + ": " + reccl::lastError();
      };
      refused(c.allReduce<float>(four, three, recclSum), "allReduce recv: 3 elements, the call needs 4", "allReduce");
      refused(c.allGather<float>(three, four), "allGather recv: 4 elements, the call needs 9", "allGather");
      refused(c.reduceScatter<float>(four, three, recclSum), "reduceScatter send: 4 elements, the call needs 9", "reduceScatter");
      refused(c.allToAll<float>(four, four), "allToAll send: 4 elements, not 3 blocks", "allToAll");
      reccl::Group g;
      refused(g.end(), "Group: not started", "an end without a start");
      // Calls that succeed after a refusal leave it the last failure, handles ended on the way
      // out of a scope included.
      refused(c.allGather<float>(three, four), "allGather recv: 4 elements, the call needs 9", "allGather again");
      {
        reccl::Registration reg;
        if (!check(reccl::Registration::make(&reg, c, four.data(), sizeof(float) * 4), "register after a refusal")) return;
      }
      if (reccl::lastError().find("allGather recv") == std::string::npos)
        err += " the refusal was lost to calls that succeeded: " + reccl::lastError();
      // A C call that fails afterwards has the last word.
      if (recclAllReduce(nullptr, four.data(), 4, recclFloat32, recclSum, c.get(), nullptr) != recclInvalidArgument ||
          reccl::lastError().find("sendbuff: null") == std::string::npos)
        err += " after a failed C call: " + reccl::lastError();
      refused(c.allReduce<float>(three, four, recclSum), "allReduce recv: 4 elements, the call needs 3", "allReduce again");
      // ... also one that fails through the layer with the text the C API had before.
      if (c.broadcast<float>(four, n) != recclInvalidArgument || reccl::lastError().find("root") == std::string::npos)
        err += " a C failure through the layer: " + reccl::lastError();
      refused(c.allReduce<float>(three, four, recclSum), "allReduce recv", "allReduce a third time");
      if (c.broadcast<float>(four, n) != recclInvalidArgument || reccl::lastError().find("root") == std::string::npos)
        err += " the same C failure again: " + reccl::lastError();
      reccl::Communicator none;  // a null handle: the C API names it
      if (none.allGather<float>(three, four) != recclInvalidArgument || reccl::lastError().find("comm") == std::string::npos)
        err += " a null communicator: " + reccl::lastError();
    }
    check(c.barrier(), "barrier");
    check(c.finalize(), "finalize");
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
}

// A home NIC (the NCCL net plugin's per-NIC devices) that the rank does not use (down since the
// plugin listed it, or left out by RECCL_NICS) is warned of and ignored: the communicator forms
// and carries on the NICs it has.
TEST(NcclApi, AHomeNicTheRankDoesNotUseIsWarnedOfAndIgnored) {
  std::mutex mu;
  std::string warned;
  logSetSink([&](LogLevel level, std::string_view line) {
    if (level != LogLevel::kWarn || line.find("home NIC") == std::string_view::npos) return;
    std::lock_guard lk(mu);
    warned += std::string(line) + "\n";
  });
  recclUniqueId id;
  ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
  std::vector<std::string> errs(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      recclComm_t c = nullptr;
      if (recclResult_t rc = api::initRankOnNic(&c, 2, id, r, nullptr, "no-such-nic0"); rc != recclSuccess) {
        errs[r] = std::string("init: ") + recclGetErrorString(rc) + " " + recclGetLastError(nullptr);
        return;
      }
      std::vector<float> x(1000, 1.0f + static_cast<float>(r));
      if (recclAllReduce(x.data(), x.data(), x.size(), recclFloat32, recclSum, c, nullptr) != recclSuccess || x[999] != 3.0f)
        errs[r] = std::string("allreduce: ") + recclGetLastError(nullptr);
      recclCommDestroy(c);
    });
  for (auto& t : ranks) t.join();
  logSetSink(nullptr);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
  EXPECT_NE(warned.find("home NIC no-such-nic0 is not among the NICs this rank uses"), std::string::npos) << warned;

  // A NIC the ranks use: its place in their list is what each publishes as its home rail.
  std::vector<core::NicInfo> nics;
  {
    Comms probe(1);
    ASSERT_TRUE(probe.ok()) << probe.error();
    nics = api::commImpl(probe[0])->rankTable()[0].nics;
  }
  ASSERT_FALSE(nics.empty());
  const std::string home = nics.back().name;
  ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
  std::vector<int> published(2, -2);
  ranks.clear();
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      recclComm_t c = nullptr;
      if (api::initRankOnNic(&c, 2, id, r, nullptr, home) != recclSuccess) return;
      published[r] = api::commImpl(c)->rankTable()[r].homeRail;
      recclCommDestroy(c);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_EQ(published[r], static_cast<int>(nics.size()) - 1) << "rank " << r << " home " << home;
}

// ---- registration, device memory, the communicator's device --------------------------------

std::string lastError() { return recclGetLastError(nullptr); }

#define OR_RETURN(call)                      \
  do {                                       \
    recclResult_t rc_ = (call);              \
    if (rc_ != recclSuccess) return rc_;     \
  } while (0)

// Registered buffers carry collectives bit for bit; every handle ends once, on its own
// communicator only; the arguments are checked by name.
TEST(NcclApi, RegistrationsEndOnceAndOnlyOnTheirCommunicator) {
  const int n = 2;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  const size_t count = 1 << 16;
  std::vector<std::vector<float>> send(n, std::vector<float>(count)), recv(n, std::vector<float>(count, -1));
  std::vector<void*> hs(n), hr(n), again(n);
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    for (size_t i = 0; i < count; ++i) send[r][i] = static_cast<float>((r + 1) * 1000 + i % 977);
    OR_RETURN(recclCommRegister(c, send[r].data(), count * sizeof(float), &hs[r]));
    OR_RETURN(recclCommRegister(c, recv[r].data(), count * sizeof(float), &hr[r]));
    // The same range again (and overlapping the first): a handle of its own.
    OR_RETURN(recclCommRegister(c, send[r].data() + 8, 64, &again[r]));
    return recclAllReduce(send[r].data(), recv[r].data(), count, recclFloat32, recclSum, c, nullptr);
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << lastError();
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(recv[r][i], static_cast<float>(1000 + i % 977) + static_cast<float>(2000 + i % 977))
          << "rank " << r << " element " << i;
  std::set<void*> distinct{hs[0], hr[0], again[0], hs[1], hr[1], again[1]};
  EXPECT_EQ(distinct.size(), 6u) << "a handle was handed out twice";
  EXPECT_EQ(distinct.count(nullptr), 0u);

  // Rank 0's handle is nothing on rank 1's communicator, and stays live on rank 0's.
  EXPECT_EQ(recclCommDeregister(world[1], hs[0]), recclInvalidArgument);
  EXPECT_NE(lastError().find("handle: no live registration"), std::string::npos) << lastError();
  EXPECT_EQ(recclCommDeregister(world[0], hs[0]), recclSuccess) << lastError();
  EXPECT_EQ(recclCommDeregister(world[0], hs[0]), recclInvalidArgument) << "a handle ended twice";
  EXPECT_EQ(recclCommDeregister(world[0], nullptr), recclInvalidArgument);
  EXPECT_NE(lastError().find("handle"), std::string::npos) << lastError();
  EXPECT_EQ(recclCommDeregister(world[0], again[0]), recclSuccess) << lastError();
  EXPECT_EQ(recclCommDeregister(world[1], hr[1]), recclSuccess) << lastError();
  // hr[0], hs[1], again[1] stay registered: they go with their communicators.

  void* h = reinterpret_cast<void*>(0x1);
  float x[4];
  EXPECT_EQ(recclCommRegister(world[0], nullptr, 16, &h), recclInvalidArgument);
  EXPECT_NE(lastError().find("buff"), std::string::npos) << lastError();
  EXPECT_EQ(h, nullptr) << "a refused registration left a handle behind";
  EXPECT_EQ(recclCommRegister(world[0], x, 0, &h), recclInvalidArgument);
  EXPECT_NE(lastError().find("size"), std::string::npos) << lastError();
  EXPECT_EQ(recclCommRegister(world[0], x, SIZE_MAX, &h), recclInvalidArgument);
  EXPECT_NE(lastError().find("address space"), std::string::npos) << lastError();
  EXPECT_EQ(recclCommRegister(world[0], x, sizeof x, nullptr), recclInvalidArgument);
  EXPECT_NE(lastError().find("handle"), std::string::npos) << lastError();
  EXPECT_EQ(recclCommRegister(nullptr, x, sizeof x, &h), recclInvalidArgument);
  EXPECT_NE(lastError().find("comm"), std::string::npos) << lastError();
}

// A finalized communicator takes no new registration, and its registrations still end.
TEST(NcclApi, RegistrationsEndAfterFinalize) {
  const int n = 2;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<float> buf(256);
  std::vector<void*> h(n, nullptr);
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    OR_RETURN(recclCommRegister(c, buf.data(), buf.size() * sizeof(float), &h[r]));
    return recclCommFinalize(c);
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << lastError();
  void* late = nullptr;
  EXPECT_EQ(recclCommRegister(world[0], buf.data(), 4, &late), recclInvalidUsage);
  EXPECT_NE(lastError().find("finalized"), std::string::npos) << lastError();
  for (int r = 0; r < n; ++r) EXPECT_EQ(recclCommDeregister(world[r], h[r]), recclSuccess) << lastError();
}

// Windows: every rank registers in one call and the collectives on them are bit for bit; the
// ranks end them in the order they choose, the same on all; a handle ends once.
TEST(NcclApi, WindowsAreRegisteredAndEndedByEveryRankTogether) {
  const int n = 3;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  const size_t count = 1 << 16;
  std::vector<std::vector<float>> send(n, std::vector<float>(count)), recv(n, std::vector<float>(count, -1));
  std::vector<recclWindow_t> ws(n), wr(n);
  std::vector<std::string> errs(n);
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    for (size_t i = 0; i < count; ++i) send[r][i] = static_cast<float>((r + 1) * 1000 + i % 977);
    recclResult_t rc = recclCommWindowRegister(c, send[r].data(), count * sizeof(float), &ws[r], RECCL_WIN_DEFAULT);
    if (rc == recclSuccess)
      rc = recclCommWindowRegister(c, recv[r].data(), count * sizeof(float), &wr[r], RECCL_WIN_COLL_SYMMETRIC);
    if (rc == recclSuccess)
      rc = recclAllReduce(send[r].data(), recv[r].data(), count, recclFloat32, recclSum, c, nullptr);
    // Ended in the other order than made: the ranks agree on which, not on the order.
    if (rc == recclSuccess) rc = recclCommWindowDeregister(c, wr[r]);
    if (rc == recclSuccess) rc = recclCommWindowDeregister(c, ws[r]);
    if (rc != recclSuccess) errs[r] = lastError();
    return rc;
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << errs[r];
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(recv[r][i], static_cast<float>(6000 + 3 * (i % 977))) << "rank " << r << " element " << i;
  std::set<recclWindow_t> distinct{ws[0], wr[0], ws[1], wr[1], ws[2], wr[2]};
  EXPECT_EQ(distinct.size(), 6u);
  EXPECT_EQ(distinct.count(nullptr), 0u);
  // Ended: a second end is refused at once (no exchange), by name.
  EXPECT_EQ(recclCommWindowDeregister(world[0], ws[0]), recclInvalidArgument);
  EXPECT_NE(lastError().find("win: no live registration"), std::string::npos) << lastError();
  // A window is no registration, nor the other way round.
  void* h = nullptr;
  ASSERT_EQ(recclCommRegister(world[0], send[0].data(), 64, &h), recclSuccess) << lastError();
  EXPECT_EQ(recclCommWindowDeregister(world[0], static_cast<recclWindow_t>(h)), recclInvalidArgument);
  EXPECT_EQ(recclCommDeregister(world[0], h), recclSuccess) << lastError();
}

// Ranks that register different windows, or end different ones, are named on every rank and no
// rank changes its windows: the next call that agrees goes through.
TEST(NcclApi, WindowsThatDifferBetweenRanksAreNamedOnEveryRank) {
  const int n = 2;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<float> a(4096), b(4096);
  struct Case {
    const char* what;
    size_t size1;    // rank 1's size (rank 0: 4096 floats)
    int flags1;      // rank 1's flags (rank 0: DEFAULT)
    const char* says;
  };
  for (const Case& k : {Case{"size", 1024 * sizeof(float), RECCL_WIN_DEFAULT, "bytes"},
                        Case{"flags", 4096 * sizeof(float), RECCL_WIN_COLL_SYMMETRIC, "winFlags 1"}}) {
    std::vector<std::string> errs(n);
    std::vector<recclWindow_t> w(n, reinterpret_cast<recclWindow_t>(0x1));
    auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
      recclResult_t rc = recclCommWindowRegister(c, a.data(), r == 0 ? a.size() * sizeof(float) : k.size1, &w[r],
                                                 r == 0 ? RECCL_WIN_DEFAULT : k.flags1);
      errs[r] = lastError();
      return rc;
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(rcs[r], recclInvalidUsage) << k.what << ", rank " << r;
      EXPECT_NE(errs[r].find("rank " + std::to_string(1 - r)), std::string::npos) << k.what << ": " << errs[r];
      EXPECT_EQ(w[r], nullptr) << k.what << ": a refused window left a handle behind";
    }
    EXPECT_NE(errs[0].find(k.says), std::string::npos) << errs[0];
  }
  // A register against a deregister; then two windows, ended crosswise; then ended alike.
  std::vector<recclWindow_t> wa(n), wb(n);
  std::vector<std::string> errs(n);
  std::vector<recclResult_t> mixed(n), crossed(n);
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    recclResult_t rc = recclCommWindowRegister(c, a.data(), a.size() * sizeof(float), &wa[r], RECCL_WIN_DEFAULT);
    if (rc != recclSuccess) return rc;
    recclWindow_t extra = nullptr;
    mixed[r] = r == 0 ? recclCommWindowRegister(c, b.data(), b.size() * sizeof(float), &extra, RECCL_WIN_DEFAULT)
                      : recclCommWindowDeregister(c, wa[r]);
    if (mixed[r] == recclSuccess) return recclInternalError;
    rc = recclCommWindowRegister(c, b.data(), b.size() * sizeof(float), &wb[r], RECCL_WIN_DEFAULT);
    if (rc != recclSuccess) return rc;
    crossed[r] = recclCommWindowDeregister(c, r == 0 ? wa[r] : wb[r]);
    errs[r] = lastError();
    if (crossed[r] == recclSuccess) return recclInternalError;
    rc = recclCommWindowDeregister(c, wa[r]);
    return rc == recclSuccess ? recclCommWindowDeregister(c, wb[r]) : rc;
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << recclGetErrorString(rcs[r]);
    EXPECT_EQ(mixed[r], recclInvalidUsage) << "rank " << r;
    EXPECT_EQ(crossed[r], recclInvalidUsage) << "rank " << r;
    EXPECT_NE(errs[r].find("every rank must end the same window"), std::string::npos) << errs[r];
  }
}

// The arguments, refused at once by name; a group is no place for a window; a finalized
// communicator's windows end on each rank alone.
TEST(NcclApi, WindowCallsCheckTheirArgumentsAndEndAfterFinalize) {
  const int n = 2;
  Comms world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  float x[1024];
  recclWindow_t w = reinterpret_cast<recclWindow_t>(0x1);
  EXPECT_EQ(recclCommWindowRegister(world[0], x, sizeof x, nullptr, RECCL_WIN_DEFAULT), recclInvalidArgument);
  EXPECT_NE(lastError().find("win"), std::string::npos) << lastError();
  EXPECT_EQ(recclCommWindowRegister(world[0], nullptr, sizeof x, &w, RECCL_WIN_DEFAULT), recclInvalidArgument);
  EXPECT_NE(lastError().find("buff"), std::string::npos) << lastError();
  EXPECT_EQ(w, nullptr);
  EXPECT_EQ(recclCommWindowRegister(world[0], x, 0, &w, RECCL_WIN_DEFAULT), recclInvalidArgument);
  EXPECT_NE(lastError().find("size"), std::string::npos) << lastError();
  EXPECT_EQ(recclCommWindowRegister(world[0], x, sizeof x, &w, 0x6), recclInvalidArgument);
  EXPECT_NE(lastError().find("winFlags"), std::string::npos) << lastError();
  EXPECT_EQ(recclCommWindowRegister(nullptr, x, sizeof x, &w, RECCL_WIN_DEFAULT), recclInvalidArgument);
  EXPECT_EQ(recclCommWindowDeregister(world[0], nullptr), recclInvalidArgument);
  EXPECT_NE(lastError().find("win: null"), std::string::npos) << lastError();
  ASSERT_EQ(recclGroupStart(), recclSuccess);
  EXPECT_EQ(recclCommWindowRegister(world[0], x, sizeof x, &w, RECCL_WIN_DEFAULT), recclInvalidUsage);
  EXPECT_NE(lastError().find("group"), std::string::npos) << lastError();
  ASSERT_EQ(recclGroupEnd(), recclSuccess);

  std::vector<recclWindow_t> ws(n, nullptr);
  auto rcs = world.run([&](int r, recclComm_t c) -> recclResult_t {
    recclResult_t rc = recclCommWindowRegister(c, x, sizeof x, &ws[r], RECCL_WIN_DEFAULT);
    return rc == recclSuccess ? recclCommFinalize(c) : rc;
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(rcs[r], recclSuccess) << "rank " << r;
  EXPECT_EQ(recclCommWindowRegister(world[0], x, sizeof x, &w, RECCL_WIN_DEFAULT), recclInvalidUsage);
  EXPECT_NE(lastError().find("finalized"), std::string::npos) << lastError();
  // Rank 0 alone: a finalized communicator exchanges nothing more, so this cannot wait for rank 1.
  EXPECT_EQ(recclCommWindowDeregister(world[0], ws[0]), recclSuccess) << lastError();
  EXPECT_EQ(recclCommWindowDeregister(world[0], ws[0]), recclInvalidArgument);
}

// The arguments of the device calls, checked by name in every build and process (with a GPU or
// without): nothing allocated, and a pointer recclMemAlloc did not return is never freed.
TEST(NcclApi, DeviceCallsCheckTheirArgumentsByName) {
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(recclMemAlloc(nullptr, 1 << 20), recclInvalidArgument);
  EXPECT_NE(lastError().find("ptr"), std::string::npos) << lastError();
  EXPECT_EQ(recclMemAlloc(&p, 0), recclInvalidArgument);
  EXPECT_NE(lastError().find("size"), std::string::npos) << lastError();
  EXPECT_EQ(p, nullptr) << "a refused allocation left a pointer behind";
  EXPECT_EQ(recclMemFree(nullptr), recclSuccess);
  std::vector<char> mine(64);
  EXPECT_EQ(recclMemFree(mine.data()), recclInvalidArgument);
  EXPECT_NE(lastError().find("not from recclMemAlloc"), std::string::npos) << lastError();
  int device = 77;
  EXPECT_EQ(recclCommCuDevice(nullptr, &device), recclInvalidArgument);
  EXPECT_NE(lastError().find("comm"), std::string::npos) << lastError();
  Comms world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  EXPECT_EQ(recclCommCuDevice(world[0], nullptr), recclInvalidArgument);
  EXPECT_NE(lastError().find("device"), std::string::npos) << lastError();
  // A device no process has: refused before any rank starts.
  recclComm_t comms[2] = {reinterpret_cast<recclComm_t>(0x1), reinterpret_cast<recclComm_t>(0x1)};
  const int devlist[2] = {0, 4096};
  EXPECT_NE(recclCommInitAll(comms, 2, devlist), recclSuccess);
  EXPECT_NE(lastError().find("devlist"), std::string::npos) << lastError();
}

// Device memory and a communicator's device in a process without a GPU (here, and on CI) or a
// build without CUDA: refused with the reason. (On a GPU: tests/unit/cuda's stream worker
// allocates, registers, runs every collective on the memory and frees it, and checks the device.)
TEST(NcclApi, DeviceMemoryAndDeviceWithoutAGpuAreRefusedWithTheReason) {
#if RECCL_HAVE_CUDA
  if (reccl::cuda::deviceCount() > 0) GTEST_SKIP() << "a CUDA device is here: cuda_device_test covers it";
  const recclResult_t allocRefused = recclUnhandledCudaError;
  const char* allocWhy = "no CUDA device";
  const char* commWhy = "no CUDA device current";
  const recclResult_t devlistRefused = recclInvalidArgument;
#else
  const recclResult_t allocRefused = recclInvalidUsage;
  const char* allocWhy = "no CUDA path";
  const char* commWhy = "no CUDA path";
  const recclResult_t devlistRefused = recclInvalidUsage;
#endif
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(recclMemAlloc(&p, 1 << 20), allocRefused);
  EXPECT_NE(lastError().find(allocWhy), std::string::npos) << lastError();
  EXPECT_EQ(p, nullptr);

  Comms world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  int device = 77;
  EXPECT_EQ(recclCommCuDevice(world[0], &device), recclInvalidUsage);
  EXPECT_NE(lastError().find(commWhy), std::string::npos) << lastError();
  EXPECT_EQ(device, 77);
  // A split's child of a communicator with no device has none either (no device is current).
  std::vector<recclComm_t> child(2, nullptr);
  auto rcs = world.run([&](int r, recclComm_t c) { return recclCommSplit(c, 0, r, &child[r], nullptr); });
  for (int r = 0; r < 2; ++r) ASSERT_EQ(rcs[r], recclSuccess) << lastError();
  EXPECT_EQ(recclCommCuDevice(child[0], &device), recclInvalidUsage);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(recclCommDestroy(child[r]), recclSuccess);

  recclComm_t comms[2] = {reinterpret_cast<recclComm_t>(0x1), reinterpret_cast<recclComm_t>(0x1)};
  const int devlist[2] = {0, 0};
  EXPECT_EQ(recclCommInitAll(comms, 2, devlist), devlistRefused);
  EXPECT_NE(lastError().find("devlist"), std::string::npos) << lastError();
  EXPECT_EQ(comms[0], reinterpret_cast<recclComm_t>(0x1)) << "a refused devlist touched the comms";
}

// recclGetUniqueId here; the ranks are other processes (api_worker, linked with libreccl.so as an
// application is) that get the id as text, as an application would hand it over MPI.
TEST(NcclApi, UniqueIdJoinsRanksInOtherProcesses) {
  const int n = 3;
  recclUniqueId id;
  ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
  std::string hex;
  for (unsigned char b : id.internal) {
    char h[3];
    std::snprintf(h, sizeof h, "%02x", b);
    hex += h;
  }
  std::vector<std::unique_ptr<benchtest::Child>> ranks;
  std::vector<std::string> outs;
  for (int r = 0; r < n; ++r) {
    outs.push_back(::testing::TempDir() + "api_worker." + std::to_string(getpid()) + "." + std::to_string(r));
    ranks.push_back(std::make_unique<benchtest::Child>(
        std::vector<std::string>{RECCL_API_WORKER_PATH, "uid", hex, std::to_string(n), std::to_string(r)},
        std::vector<std::string>{}, outs.back()));
  }
  for (int r = 0; r < n; ++r) {
    int rc = ranks[r]->wait(std::chrono::seconds(60));
    std::string out = benchtest::slurp(outs[r]);
    EXPECT_EQ(rc, 0) << "rank " << r << ": " << out;
    EXPECT_NE(out.find("api_worker: rank " + std::to_string(r) + " of 3: ok"), std::string::npos) << out;
    std::remove(outs[r].c_str());
  }
}

}  // namespace
}  // namespace reccl::test
