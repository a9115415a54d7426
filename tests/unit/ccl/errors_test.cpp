// Failure behaviour: bad arguments name the argument, mismatched collectives are detected, a dead
// or silent rank becomes an error within RECCL_TIMEOUT_MS, abort returns promptly, strangers on
// the bootstrap and data ports are refused without disturbing the job.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <thread>
#include <vector>

#include "api/comm_access.h"
#include "ccl_test_util.h"
#include "worker_procs.h"
#include "core/bootstrap.h"
#include "core/wire.h"
#include "reccl/common/log.h"
#if RECCL_HAVE_CUDA
#include "transport/cuda/device_probe.h"
#endif

namespace {

using reccl::test::Comms;
using reccl::test::freePort;
using reccl::test::rawConnect;
using reccl::test::ScopedEnv;
using reccl::test::Workers;
using Ms = std::chrono::milliseconds;

std::string lastError() { return recclGetLastError(nullptr); }

TEST(CclErrors, BadArgumentsNameTheArgument) {
  Comms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  recclComm_t c = comms[0];
  float buf[8] = {};
  struct Case {
    recclResult_t rc;
    const char* arg;
  };
  auto expect = [&](recclResult_t rc, recclResult_t want, const char* arg) {
    EXPECT_EQ(rc, want) << arg;
    EXPECT_NE(lastError().find(arg), std::string::npos) << "message '" << lastError() << "' should name " << arg;
  };
  expect(recclAllReduce(buf, buf, 8, recclFloat32, recclSum, nullptr, nullptr), recclInvalidArgument, "comm");
  expect(recclAllReduce(nullptr, buf, 8, recclFloat32, recclSum, c, nullptr), recclInvalidArgument, "sendbuff");
  expect(recclAllReduce(buf, nullptr, 8, recclFloat32, recclSum, c, nullptr), recclInvalidArgument, "recvbuff");
  expect(recclAllReduce(buf, buf, SIZE_MAX / 2, recclFloat32, recclSum, c, nullptr), recclInvalidArgument, "count");
  expect(recclAllGather(buf, buf, SIZE_MAX / 8, recclFloat32, c, nullptr), recclInvalidArgument, "count");
  expect(recclAllReduce(buf, buf, 8, static_cast<recclDataType_t>(42), recclSum, c, nullptr), recclInvalidArgument,
         "datatype");
  expect(recclAllReduce(buf, buf, 8, recclFloat32, static_cast<recclRedOp_t>(9), c, nullptr), recclInvalidArgument,
         "op");
  expect(recclAllReduce(buf, buf, 8, recclFloat32, static_cast<recclRedOp_t>(-1), c, nullptr), recclInvalidArgument,
         "op");
  expect(recclBroadcast(buf, buf, 8, recclFloat32, 2, c, nullptr), recclInvalidArgument, "root");
  expect(recclReduce(buf, buf, 8, recclFloat32, recclSum, -1, c, nullptr), recclInvalidArgument, "root");
  expect(recclSend(buf, 8, recclFloat32, 5, c, nullptr), recclInvalidArgument, "peer");
#if RECCL_HAVE_CUDA
  // A CUDA build takes streams (0x1 is cudaStreamLegacy there); without a device it refuses one.
  if (reccl::cuda::deviceCount() == 0)
#endif
  {
    expect(recclAllReduce(buf, buf, 8, recclFloat32, recclSum, c, reinterpret_cast<recclStream_t>(1)),
           recclInvalidArgument, "stream");
    // Also when a group would queue the call: refused at the call, not at recclGroupEnd.
    ASSERT_EQ(recclGroupStart(), recclSuccess);
    expect(recclAllReduce(buf, buf, 8, recclFloat32, recclSum, c, reinterpret_cast<recclStream_t>(1)),
           recclInvalidArgument, "stream");
    ASSERT_EQ(recclGroupEnd(), recclSuccess);
  }
  expect(recclAllToAll(buf, buf, 4, recclFloat32, c, nullptr), recclInvalidArgument, "recvbuff");
  expect(recclGroupEnd(), recclInvalidUsage, "GroupEnd");
  recclComm_t none = nullptr;
  recclUniqueId id{};
  expect(recclCommInitRank(&none, 2, id, 0), recclInvalidArgument, "commId");
  expect(recclCommInitRank(&none, 2, id, 3), recclInvalidArgument, "rank");
  // Refused calls left the communicator healthy: a real collective still works.
  auto rcs = comms.run([&](int r, recclComm_t cc) {
    float x[4] = {1, 2, 3, 4};
    return recclAllReduce(x, x, 4, recclFloat32, recclSum, cc, nullptr);
  });
  for (auto rc : rcs) EXPECT_EQ(rc, recclSuccess);
}

TEST(CclErrors, MismatchedCountsAreDetected) {
  // A long timeout keeps "fails fast" (under 10 s, room for a loaded machine) apart from "timed out".
  ScopedEnv t("RECCL_TIMEOUT_MS", "30000");
  for (const char* algo : {"rd", "ring"}) {
    ScopedEnv a("RECCL_ALGO", algo);
    Comms comms(3);
    ASSERT_TRUE(comms.ok()) << comms.error();
    std::vector<std::string> msgs(3);
    auto start = std::chrono::steady_clock::now();
    auto rcs = comms.run([&](int r, recclComm_t c) {
      std::vector<float> x(100, 1.0f);
      recclResult_t rc = recclAllReduce(x.data(), x.data(), r == 1 ? 99 : 100, recclFloat32, recclSum, c, nullptr);
      msgs[r] = recclGetLastError(c);
      return rc;
    });
    EXPECT_LT(std::chrono::steady_clock::now() - start, Ms(10000)) << "mismatch should fail fast, not time out";
    int usage = 0;
    for (int r = 0; r < 3; ++r) {
      EXPECT_NE(rcs[r], recclSuccess) << algo << " rank " << r;
      if (rcs[r] == recclInvalidUsage) {
        ++usage;
        EXPECT_NE(msgs[r].find("count"), std::string::npos) << msgs[r];
      }
    }
    EXPECT_GE(usage, 1) << algo;
  }
}

TEST(CclErrors, MismatchedCollectivesAreDetected) {
  ScopedEnv t("RECCL_TIMEOUT_MS", "5000");
  Comms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::string> msgs(2);
  auto rcs = comms.run([&](int r, recclComm_t c) {
    std::vector<float> x(64, 1.0f);
    recclResult_t rc = r == 0 ? recclAllReduce(x.data(), x.data(), 64, recclFloat32, recclSum, c, nullptr)
                              : recclBroadcast(x.data(), x.data(), 64, recclFloat32, 0, c, nullptr);
    msgs[r] = recclGetLastError(c);
    return rc;
  });
  EXPECT_NE(rcs[0], recclSuccess);
  EXPECT_NE(rcs[1], recclSuccess);
  EXPECT_TRUE(rcs[0] == recclInvalidUsage || rcs[1] == recclInvalidUsage) << msgs[0] << " | " << msgs[1];
}

// A broadcast whose ranks each take themselves for the root ends at each of them (a root only
// sends, and its sends fit the connection's slots); the next call that meets the data the other
// sent fails, naming that broadcast as the other rank called it. Both ranks fail; the second
// to look may see the first's communicator gone instead.
TEST(CclErrors, BroadcastRootsThatDifferAreNamedByTheNextCall) {
  ScopedEnv t("RECCL_TIMEOUT_MS", "30000");
  for (const char* shmOff : {"0", "1"}) {
    SCOPED_TRACE(std::string("RECCL_SHM_DISABLE=") + shmOff);
    ScopedEnv shm("RECCL_SHM_DISABLE", shmOff);
    Comms comms(2);
    ASSERT_TRUE(comms.ok()) << comms.error();
    std::vector<std::string> msgs(2);
    std::vector<recclResult_t> bcast(2);
    auto start = std::chrono::steady_clock::now();
    auto rcs = comms.run([&](int r, recclComm_t c) {
      std::vector<float> x(1000, 1.0f + r);
      bcast[r] = recclBroadcast(x.data(), x.data(), 1000, recclFloat32, r, c, nullptr);
      recclResult_t rc = recclAllReduce(x.data(), x.data(), 10, recclFloat32, recclSum, c, nullptr);
      msgs[r] = recclGetLastError(c);
      return rc;
    });
    EXPECT_LT(std::chrono::steady_clock::now() - start, Ms(10000)) << "a mismatch should fail fast, not time out";
    int named = 0;
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(bcast[r], recclSuccess) << "rank " << r;
      EXPECT_NE(rcs[r], recclSuccess) << "rank " << r;
      if (rcs[r] != recclInvalidUsage) continue;
      ++named;
      const std::string theirs = "rank " + std::to_string(1 - r) + " sent data of its broadcast #1 (1000 float, root " +
                                 std::to_string(1 - r) + ")";
      EXPECT_NE(msgs[r].find(theirs), std::string::npos) << msgs[r];
    }
    EXPECT_GE(named, 1) << msgs[0] << " | " << msgs[1];
  }
}

TEST(CclErrors, SilentPeerTimesOut) {
  ScopedEnv t("RECCL_TIMEOUT_MS", "300");
  Comms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::atomic<bool> done{false};
  auto start = std::chrono::steady_clock::now();
  auto rcs = comms.run([&](int r, recclComm_t c) {
    if (r == 1) {
      while (!done.load()) std::this_thread::sleep_for(Ms(5));
      return recclSuccess;
    }
    float x[16] = {};
    recclResult_t rc = recclAllReduce(x, x, 16, recclFloat32, recclSum, c, nullptr);
    done = true;
    return rc;
  });
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(rcs[0], recclTimeout) << lastError();
  EXPECT_LT(took, Ms(3000));
  recclResult_t async = recclSuccess;
  EXPECT_EQ(recclCommGetAsyncError(comms[0], &async), recclSuccess);
  EXPECT_EQ(async, recclTimeout);
}

// A call that fails on its own (here: its peer never joins) loses no connection: the counters
// of lost connections are for peers that went, not for every port a failure ends.
TEST(CclErrors, ATimedOutCallLosesNoConnection) {
  ScopedEnv t("RECCL_TIMEOUT_MS", "300");
  ScopedEnv tcp("RECCL_SHM_DISABLE", "1");
  Comms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  auto rcs = comms.run([](int r, recclComm_t c) {  // connects the ranks
    float x[16] = {};
    return recclAllReduce(x, x, 16, recclFloat32, recclSum, c, nullptr);
  });
  ASSERT_EQ(rcs[0], recclSuccess);
  float x[16] = {};
  ASSERT_EQ(recclAllReduce(x, x, 16, recclFloat32, recclSum, comms[0], nullptr), recclTimeout) << lastError();
  recclCommStats_t st{};
  st.size = sizeof(st);
  ASSERT_EQ(recclCommGetStats(comms[0], &st), recclSuccess);
  EXPECT_EQ(st.lostConnections, 0u);
  EXPECT_EQ(st.firstLostPeer, -1);
  int lost = -1;
  ASSERT_EQ(recclCommPeerLost(comms[0], 1, &lost), recclSuccess);
  EXPECT_EQ(lost, 0);
}

TEST(CclErrors, AbortFromAnotherThreadReturnsPromptly) {
  ScopedEnv t("RECCL_TIMEOUT_MS", "60000");
  Comms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  recclResult_t rc = recclSuccess;
  std::atomic<bool> calling{false};
  std::thread worker([&] {
    std::vector<float> x(1 << 20, 1.0f);
    calling = true;
    rc = recclAllReduce(x.data(), x.data(), x.size(), recclFloat32, recclSum, comms[0], nullptr);
  });
  // The worker is about to call (a loaded machine may take long to get there), then inside the
  // call: it waits for rank 1, which never joins.
  while (!calling.load()) std::this_thread::sleep_for(Ms(1));
  std::this_thread::sleep_for(Ms(200));
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(recclCommAbort(comms[0]), recclSuccess);
  comms.forget(0);
  // Against the 60 s timeout: promptly is within 3 s, load included.
  EXPECT_LT(std::chrono::steady_clock::now() - start, Ms(3000));
  worker.join();
  EXPECT_EQ(rc, recclAborted);
}

// Every thread of `pid` is stopped (state T in /proc), waiting up to 5 s: a stop signal takes
// effect thread by thread.
bool allThreadsStopped(pid_t pid) {
  for (int tries = 0; tries < 500; ++tries) {
    bool all = true;
    DIR* d = opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
    if (!d) return false;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream st("/proc/" + std::to_string(pid) + "/task/" + e->d_name + "/stat");
      std::string line;
      std::getline(st, line);
      size_t paren = line.rfind(')');
      if (paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'T') all = false;
    }
    closedir(d);
    if (all) return true;
    std::this_thread::sleep_for(Ms(10));
  }
  return false;
}

// An abort while another thread's call is setting up a connection whose peer accepted it but
// never answers the hello (a stopped process): the connect ends at once, and the abort does not
// wait for its deadline.
TEST(CclErrors, AbortEndsAConnectWaitingForTheHelloReply) {
  for (const char* shm : {"0", "1"}) {
    // Three ranks: 0 -> 2 is no edge of the ring, so rank 0's first send to rank 2 connects then.
    Workers w;
    uint16_t port = freePort();
    std::vector<std::string> extra = {"WORKER_ITERS=1", "WORKER_COUNT=1000", std::string("RECCL_SHM_DISABLE=") + shm};
    ASSERT_GT(w.spawn(1, 3, port, extra), 0);
    pid_t peer = w.spawn(2, 3, port, extra);
    ASSERT_GT(peer, 0);
    ScopedEnv rank("RANK", "0"), size("WORLD_SIZE", "3"), addr("MASTER_ADDR", "127.0.0.1"),
        mport("MASTER_PORT", std::to_string(port).c_str()), t("RECCL_TIMEOUT_MS", "20000"), s("RECCL_SHM_DISABLE", shm);
    recclComm_t c = nullptr;
    ASSERT_EQ(recclCommInitFromEnv(&c), recclSuccess) << lastError();
    ASSERT_EQ(kill(peer, SIGSTOP), 0);
    ASSERT_TRUE(allThreadsStopped(peer)) << "rank 2 did not stop";
    recclResult_t rc = recclSuccess;
    std::atomic<bool> calling{false};
    std::thread sender([&] {
      std::vector<float> x(1000, 1.0f);
      calling = true;
      rc = recclSend(x.data(), x.size(), recclFloat32, 2, c, nullptr);
    });
    while (!calling.load()) std::this_thread::sleep_for(Ms(1));
    std::this_thread::sleep_for(Ms(500));  // inside the connect, waiting for the reply
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(recclCommAbort(c), recclSuccess);
    // Against the 20 s timeout: promptly is within 3 s, load included.
    EXPECT_LT(std::chrono::steady_clock::now() - start, Ms(3000)) << "shm=" << shm;
    sender.join();
    EXPECT_EQ(rc, recclAborted) << "shm=" << shm << ": " << recclGetErrorString(rc);
    kill(peer, SIGKILL);
    kill(peer, SIGCONT);
    w.wait(peer, Ms(10000));
  }
}

TEST(CclErrors, BootstrapTimesOutWhenRanksAreMissing) {
  ScopedEnv t("RECCL_BOOTSTRAP_TIMEOUT_MS", "500");
  recclUniqueId id;
  ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
  recclComm_t c = nullptr;
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(recclCommInitRank(&c, 2, id, 0), recclTimeout) << lastError();
  EXPECT_LT(std::chrono::steady_clock::now() - start, Ms(3000));
  EXPECT_EQ(c, nullptr);
  // The unique id's root serves in this process: rank 0 says who never came.
  EXPECT_NE(std::string(lastError()).find("gathering 2 ranks, never reached by rank 1"), std::string::npos)
      << lastError();
}

// Launched ranks 0 and 2 of 4: rank 0, whose process holds the root, names the ranks that never
// came. Rank 2 came and left at its own, shorter deadline: it is not named.
TEST(CclErrors, ABootstrapTimeoutAtTheRootNamesTheRanksThatNeverCame) {
  reccl::test::ScratchDir dir("reccl-missing");
  ASSERT_TRUE(dir.ok());
  Workers w;
  uint16_t port = freePort();
  const std::string e0 = dir / "r0", e2 = dir / "r2";
  pid_t r0 = w.spawn(0, 4, port, {"RECCL_BOOTSTRAP_TIMEOUT_MS=4000", "RECCL_DEBUG=NONE", "WORKER_ITERS=1"}, e0);
  pid_t r2 = w.spawn(2, 4, port, {"RECCL_BOOTSTRAP_TIMEOUT_MS=1000", "RECCL_DEBUG=NONE", "WORKER_ITERS=1"}, e2);
  EXPECT_EQ(w.wait(r2, Ms(20000)), 10 + recclTimeout) << reccl::test::readFile(e2);
  EXPECT_EQ(w.wait(r0, Ms(20000)), 10 + recclTimeout);
  std::string err = reccl::test::readFile(e0);
  EXPECT_NE(err.find("gathering 4 ranks, never reached by ranks 1, 3"), std::string::npos) << err;
}

// Two processes claiming one rank (two jobs on one address, or a launcher's mistake) fail the
// bootstrap on every rank, each told why: the two claims of rank 1 at once, rank 0 when it comes
// after (the failed root answers it until its deadline rather than leaving it to wait that out).
TEST(CclErrors, ARankClaimedTwiceFailsEveryRankOfTheBootstrap) {
  ScopedEnv t("RECCL_BOOTSTRAP_TIMEOUT_MS", "20000");
  recclUniqueId id;
  ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
  auto init = [&](int rank, recclResult_t* rc, std::string* err) {
    recclComm_t c = nullptr;
    *rc = recclCommInitRank(&c, 3, id, rank);  // of 3 ranks: rank 2 never comes, no table goes out
    if (*rc != recclSuccess) *err = lastError();
    if (c) recclCommDestroy(c);
  };
  std::vector<recclResult_t> rc(3, recclSuccess);
  std::vector<std::string> err(3);
  {
    std::thread a(init, 1, &rc[0], &err[0]), b(init, 1, &rc[1], &err[1]);
    a.join();
    b.join();
  }
  const auto start = std::chrono::steady_clock::now();
  init(0, &rc[2], &err[2]);
  EXPECT_LT(std::chrono::steady_clock::now() - start, Ms(10000)) << "rank 0 waited for its deadline";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(rc[i], recclInvalidUsage) << "claim " << i << ": " << err[i];
    EXPECT_NE(err[i].find("rank 1 was claimed twice"), std::string::npos) << "claim " << i << ": " << err[i];
  }
}

TEST(CclErrors, StrangersOnTheBootstrapPortAreRefused) {
  recclUniqueId id;
  ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
  auto data = reccl::core::decodeUniqueId(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(id.internal), sizeof(id.internal)));
  ASSERT_TRUE(data.ok());
  uint64_t before = reccl::core::BootstrapRoot::refusedTotal();
  // Garbage, a well-formed hello without the unique id's key (its MAC is all zero), and one that
  // says nothing.
  int junk = rawConnect(data->addr, data->port);
  ASSERT_GE(junk, 0);
  std::array<std::byte, reccl::core::kAuthHelloBytes> garbage;
  garbage.fill(std::byte{0x5a});
  ASSERT_EQ(send(junk, garbage.data(), garbage.size(), 0), static_cast<ssize_t>(garbage.size()));
  int foreign = rawConnect(data->addr, data->port);
  reccl::core::Hello h;
  h.jobId = data->jobId;
  h.srcRank = 0;
  h.dstRank = -1;
  h.nranks = 2;
  std::array<std::byte, reccl::core::kAuthHelloBytes> hb{};
  reccl::core::encodeHello(h, std::span<std::byte, reccl::core::kHelloBytes>(hb.data(), reccl::core::kHelloBytes));
  ASSERT_EQ(send(foreign, hb.data(), hb.size(), 0), static_cast<ssize_t>(hb.size()));
  int idle = rawConnect(data->addr, data->port);
  ASSERT_GE(idle, 0);

  std::vector<recclComm_t> comms(2, nullptr);
  std::vector<recclResult_t> rcs(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r) ts.emplace_back([&, r] { rcs[r] = recclCommInitRank(&comms[r], 2, id, r); });
  for (auto& t : ts) t.join();
  ASSERT_EQ(rcs[0], recclSuccess) << lastError();
  ASSERT_EQ(rcs[1], recclSuccess) << lastError();
  EXPECT_GE(reccl::core::BootstrapRoot::refusedTotal() - before, 2u);
  ts.clear();
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      float x[3] = {1, 2, 3};
      rcs[r] = recclAllReduce(x, x, 3, recclFloat32, recclSum, comms[r], nullptr);
      if (x[2] != 6) rcs[r] = recclInternalError;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(rcs[0], recclSuccess);
  EXPECT_EQ(rcs[1], recclSuccess);
  ts.clear();
  for (int r = 0; r < 2; ++r) ts.emplace_back([&, r] { recclCommDestroy(comms[r]); });
  for (auto& t : ts) t.join();
  close(junk);
  close(foreign);
  close(idle);
}

TEST(CclErrors, StrangersOnTheDataPortAreRefused) {
  ScopedEnv shm("RECCL_SHM_DISABLE", "1");
  Comms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  auto* impl = reccl::api::commImpl(comms[0]);
  ASSERT_NE(impl, nullptr);
  uint16_t port = impl->dataEndpoint().port;
  int junk = rawConnect(htonl(INADDR_LOOPBACK), port);
  ASSERT_GE(junk, 0);
  std::array<std::byte, 200> garbage;
  garbage.fill(std::byte{0x11});
  ASSERT_GT(send(junk, garbage.data(), garbage.size(), 0), 0);
  // Bounded wait for the engine to read and refuse it (10 s: a loaded machine).
  for (auto end = std::chrono::steady_clock::now() + Ms(10000);
       impl->refusedConnections() == 0 && std::chrono::steady_clock::now() < end;)
    std::this_thread::sleep_for(Ms(10));
  EXPECT_GE(impl->refusedConnections(), 1u);
  auto rcs = comms.run([&](int r, recclComm_t c) {
    std::vector<int32_t> x(100000, r + 1);
    recclResult_t rc = recclAllReduce(x.data(), x.data(), x.size(), recclInt32, recclSum, c, nullptr);
    if (rc == recclSuccess && x[99999] != 3) return recclInternalError;
    return rc;
  });
  EXPECT_EQ(rcs[0], recclSuccess);
  EXPECT_EQ(rcs[1], recclSuccess);
  close(junk);
}

// A value outside its range fails init on every rank with recclInvalidUsage naming the variable,
// before anything connects: never a default in its place, never a failure at the first barrier.
TEST(CclErrors, InvalidParametersFailInitOnEveryRank) {
  for (const char* bad : {"-1", "0"}) {
    ScopedEnv timeout("RECCL_TIMEOUT_MS", bad);
    recclUniqueId id;
    ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
    std::vector<recclComm_t> comms(2, nullptr);
    std::vector<recclResult_t> rcs(2);
    std::vector<std::string> errs(2);
    std::vector<std::thread> ts;
    for (int r = 0; r < 2; ++r)
      ts.emplace_back([&, r] {
        rcs[r] = recclCommInitRank(&comms[r], 2, id, r);
        errs[r] = lastError();
      });
    for (auto& t : ts) t.join();
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(rcs[r], recclInvalidUsage) << "rank " << r;
      EXPECT_NE(errs[r].find(std::string("RECCL_TIMEOUT_MS=") + bad), std::string::npos) << errs[r];
      EXPECT_EQ(comms[r], nullptr);
    }
  }
}

// Send and receive buffers that overlap other than in the call's in-place layout are refused
// before anything runs (the call would read bytes it already wrote); the in-place layouts pass.
TEST(CclErrors, OverlappingBuffersAreRefusedUnlessInPlace) {
  Comms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<int32_t> buf(64, 1);
  int32_t* b = buf.data();
  recclComm_t c = comms[0];  // rank 0: checks only, nothing reaches rank 1
  auto refused = [&](recclResult_t r, const char* what) {
    EXPECT_EQ(r, recclInvalidArgument) << what;
    EXPECT_NE(std::string(recclGetLastError(nullptr)).find("overlaps sendbuff"), std::string::npos)
        << what << ": " << recclGetLastError(nullptr);
  };
  refused(recclAllReduce(b, b + 1, 8, recclInt32, recclSum, c, nullptr), "allreduce");
  refused(recclBroadcast(b + 1, b, 8, recclInt32, 0, c, nullptr), "broadcast at the root");
  refused(recclReduce(b, b + 3, 8, recclInt32, recclSum, 0, c, nullptr), "reduce at the root");
  refused(recclAllGather(b + 1, b, 4, recclInt32, c, nullptr), "allgather");
  refused(recclReduceScatter(b, b + 1, 4, recclInt32, recclSum, c, nullptr), "reducescatter");
  refused(recclAllToAll(b, b + 2, 4, recclInt32, c, nullptr), "alltoall");
  refused(recclGather(b + 1, b, 4, recclInt32, 0, c, nullptr), "gather at the root");
  refused(recclScatter(b, b + 1, 4, recclInt32, 0, c, nullptr), "scatter at the root");
  // In place (rank 0's block is at offset 0), both ranks taking part.
  std::vector<std::vector<int32_t>> ag(2, std::vector<int32_t>(8)), rs(2, std::vector<int32_t>(8));
  auto rcs = comms.run([&](int r, recclComm_t comm) {
    for (int i = 0; i < 8; ++i) ag[r][i] = rs[r][i] = r * 10 + i;
    recclResult_t x = recclAllGather(ag[r].data() + 4 * r, ag[r].data(), 4, recclInt32, comm, nullptr);
    if (x != recclSuccess) return x;
    return recclReduceScatter(rs[r].data(), rs[r].data() + 4 * r, 4, recclInt32, recclSum, comm, nullptr);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(rcs[r], recclSuccess) << "rank " << r;
    for (int i = 0; i < 8; ++i) EXPECT_EQ(ag[r][i], (i / 4) * 10 + i) << "allgather rank " << r << " " << i;
    for (int i = 0; i < 4; ++i) EXPECT_EQ(rs[r][4 * r + i], 10 + 2 * (4 * r + i)) << "reducescatter rank " << r;
  }
}

// recclCommInitAll that cannot start a rank's thread (address space used up) returns
// recclSystemError naming it, having stopped the ranks it started; it used to terminate the
// process. In a child process, whose address space is capped.
TEST(CclErrors, InitAllThatCannotStartARankThreadFailsCleanly) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("RECCL_BOOTSTRAP_TIMEOUT_MS", "2000", 1);
    rlimit as{512u << 20, 512u << 20};  // room for a few dozen 8 MiB thread stacks, not 300
    if (setrlimit(RLIMIT_AS, &as) != 0) _exit(90);
    std::vector<recclComm_t> comms(300, nullptr);
    recclResult_t r = recclCommInitAll(comms.data(), 300, nullptr);
    for (recclComm_t c : comms)
      if (c) _exit(91);  // a failed init leaves no handle behind
    std::string err = recclGetLastError(nullptr);
    bool named =
        err.find("cannot start the thread of rank") != std::string::npos || err.find("memory") != std::string::npos;
    _exit(r == recclSuccess ? 92 : !named ? 93 : static_cast<int>(r));
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st)) << "the child died of signal " << WTERMSIG(st);
  EXPECT_EQ(WEXITSTATUS(st), static_cast<int>(recclSystemError)) << "90 no rlimit, 91 a handle left, 92 success, "
                                                                      "93 unnamed error";
}

TEST(CclErrors, ConcurrentCommunicators) {
  Comms a(3), b(3);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<recclResult_t> ra, rb;
  std::thread ta([&] {
    ra = a.run([&](int r, recclComm_t c) {
      for (int it = 0; it < 20; ++it) {
        std::vector<float> x(100003, static_cast<float>(r + it));
        recclResult_t rc = recclAllReduce(x.data(), x.data(), x.size(), recclFloat32, recclSum, c, nullptr);
        if (rc != recclSuccess) return rc;
        if (x[100002] != static_cast<float>(3 + 3 * it)) return recclInternalError;
      }
      return recclSuccess;
    });
  });
  std::thread tb([&] {
    rb = b.run([&](int r, recclComm_t c) {
      for (int it = 0; it < 20; ++it) {
        std::vector<int64_t> x(50000, r * 10 + it);
        recclResult_t rc = recclAllReduce(x.data(), x.data(), x.size(), recclInt64, recclMax, c, nullptr);
        if (rc != recclSuccess) return rc;
        if (x[0] != 20 + it) return recclInternalError;
      }
      return recclSuccess;
    });
  });
  ta.join();
  tb.join();
  for (auto rc : ra) EXPECT_EQ(rc, recclSuccess);
  for (auto rc : rb) EXPECT_EQ(rc, recclSuccess);
}

// RECCL_FAILOVER=0 (the bookkeeping benchmark's baseline) leaves the failover threads out and
// still computes correct results.
TEST(CclErrors, FailoverOffRunsWithoutItsThreads) {
  auto threads = [] {
    size_t n = 0;
    if (DIR* d = opendir("/proc/self/task")) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') ++n;
      closedir(d);
    }
    return n;
  };
  auto allreduce = [](Comms& c) {
    return c.run([](int r, recclComm_t cc) {
      std::vector<float> x(1000, static_cast<float>(r + 1));
      recclResult_t rc = recclAllReduce(x.data(), x.data(), x.size(), recclFloat32, recclSum, cc, nullptr);
      if (rc == recclSuccess && x[999] != 3.0f) return recclInternalError;
      return rc;
    });
  };
  size_t base = threads(), on = 0, off = 0;
  {
    ScopedEnv f("RECCL_FAILOVER", "1");
    Comms c(2);
    ASSERT_TRUE(c.ok()) << c.error();
    on = threads() - base;
    for (auto rc : allreduce(c)) EXPECT_EQ(rc, recclSuccess);
  }
  {
    ScopedEnv f("RECCL_FAILOVER", "0");
    Comms c(2);
    ASSERT_TRUE(c.ok()) << c.error();
    off = threads() - base;
    for (auto rc : allreduce(c)) EXPECT_EQ(rc, recclSuccess);
  }
  // Failover runs a monitor, a migrator and an acceptor thread per communicator.
  EXPECT_GE(on, off + 2 * 3) << "threads with failover " << on << ", without " << off;
}

// A route that is not auto, direct or relay fails the communicator's set-up, naming the setting.
TEST(CclErrors, AnUnknownFailoverRouteIsRefused) {
  for (const char* bad : {"sideways", "Direct"}) {  // (empty is unset: the default, auto)
    ScopedEnv f("RECCL_FAILOVER_ROUTE", bad);
    Comms c(2);
    EXPECT_FALSE(c.ok()) << "RECCL_FAILOVER_ROUTE=" << bad;
    EXPECT_NE(c.error().find(std::string("RECCL_FAILOVER_ROUTE=") + bad + " is not valid"), std::string::npos)
        << c.error();
    EXPECT_NE(c.error().find("auto, direct, relay"), std::string::npos) << c.error();
  }
  ScopedEnv f("RECCL_FAILOVER_ROUTE", "direct");
  Comms c(2);
  EXPECT_TRUE(c.ok()) << c.error();
}

// The failover control threads carry their names and, at normal scheduling, the slice of
// RECCL_FAILOVER_SLICE_US (on a kernel with custom slices); values out of range refuse init.
TEST(CclErrors, FailoverThreadsTakeTheirSliceAndBadValuesAreRefused) {
  // se.slice (ns) of each of this process's threads called `name`.
  auto slices = [](const std::string& name) {
    std::vector<long long> out;
    if (DIR* d = opendir("/proc/self/task")) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::string dir = std::string("/proc/self/task/") + e->d_name;
        std::string comm = reccl::test::readFile(dir + "/comm");
        if (comm != name + "\n") continue;
        std::string sched = reccl::test::readFile(dir + "/sched");
        size_t at = sched.find("se.slice");
        if (at != std::string::npos) out.push_back(std::atoll(sched.c_str() + sched.find(':', at) + 1));
      }
      closedir(d);
    }
    return out;
  };
  // Waits (2 s at most) until `n` threads called `name` exist; the monitor names itself as it starts.
  auto await = [&](const std::string& name, size_t n) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    std::vector<long long> v = slices(name);
    while (v.size() < n && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(Ms(10));
      v = slices(name);
    }
    return v;
  };
  std::vector<long long> def, asked;
  {
    ScopedEnv f("RECCL_FAILOVER_SLICE_US", "0");
    Comms c(2);
    ASSERT_TRUE(c.ok()) << c.error();
    def = await("reccl-monitor", 2);
  }
  {
    ScopedEnv f("RECCL_FAILOVER_SLICE_US", "250");
    Comms c(2);
    ASSERT_TRUE(c.ok()) << c.error();
    asked = await("reccl-monitor", 2);
    for (const char* name : {"reccl-migrator", "reccl-standby"})
      for (long long s : await(name, 2)) EXPECT_EQ(s, 250'000) << name;
  }
  // Bad values first: refusing them needs no custom slices.
  for (const char* bad : {"50", "200000", "-1"}) {
    ScopedEnv f("RECCL_FAILOVER_SLICE_US", bad);
    Comms c(2);
    EXPECT_FALSE(c.ok()) << "RECCL_FAILOVER_SLICE_US=" << bad;
    EXPECT_NE(c.error().find("RECCL_FAILOVER_SLICE_US"), std::string::npos) << c.error();
  }
  {
    ScopedEnv f("RECCL_FAILOVER_RT_PRIO", "100");
    Comms c(2);
    EXPECT_FALSE(c.ok());
    EXPECT_NE(c.error().find("RECCL_FAILOVER_RT_PRIO=100"), std::string::npos) << c.error();
  }
  // At least one per communicator: a thread the monitor has just started (a migrator) carries its
  // name, and its slice, until it names itself.
  ASSERT_GE(def.size(), 2u) << "one monitor thread per communicator, named reccl-monitor";
  ASSERT_GE(asked.size(), 2u);
  if (def[0] == 250'000) GTEST_SKIP() << "the kernel's default slice is the one asked for";
  if (asked[0] == def[0]) GTEST_SKIP() << "this kernel ignores slice requests (no EEVDF custom slices)";
  for (long long s : asked) EXPECT_EQ(s, 250'000);
}

// Ranks as processes started from the launcher environment (torchrun variables); one is killed
// mid-collective and the others must fail within RECCL_TIMEOUT_MS.
TEST(CclErrors, ProcessesFromTorchrunEnvironment) {
  Workers w;
  uint16_t port = freePort();
  std::vector<pid_t> pids;
  for (int r = 0; r < 3; ++r) pids.push_back(w.spawn(r, 3, port, {"WORKER_ITERS=5", "WORKER_COUNT=300007"}));
  for (int r = 0; r < 3; ++r) EXPECT_EQ(w.wait(pids[r], Ms(60000)), 0) << "rank " << r;
}

TEST(CclErrors, RankKilledMidCollectiveFailsTheOthers) {
  for (const char* shm : {"1", "0"}) {
    Workers w;
    uint16_t port = freePort();
    // Rank 2 SIGKILLs itself at the start of iteration 3 (after init, whatever the load), while
    // the others are inside that allreduce.
    std::vector<std::string> extra = {"WORKER_ITERS=100000", "WORKER_COUNT=1000000", "RECCL_TIMEOUT_MS=3000",
                                      "WORKER_DIE_RANK=2", "WORKER_DIE_ITER=3",
                                      std::string("RECCL_SHM_DISABLE=") + shm, "RECCL_DEBUG=NONE"};
    std::vector<pid_t> pids;
    for (int r = 0; r < 4; ++r) pids.push_back(w.spawn(r, 4, port, extra));
    EXPECT_EQ(w.wait(pids[2], Ms(60000)), 128 + SIGKILL) << "shm=" << shm;
    auto died = std::chrono::steady_clock::now();
    for (int r : {0, 1, 3}) {
      int code = w.wait(pids[r], Ms(8000));
      EXPECT_TRUE(code == 10 + recclRemoteError || code == 10 + recclTimeout || code == 10 + recclNetworkError)
          << "shm=" << shm << " rank " << r << " exit " << code;
    }
    // Within RECCL_TIMEOUT_MS (3 s) of the death, plus scheduling slack on a loaded machine.
    EXPECT_LT(std::chrono::steady_clock::now() - died, Ms(6000)) << "shm=" << shm;
  }
}

// NCCL's way on after a rank's death: the others' allreduce fails, they shrink the communicator
// without the dead rank (RECCL_SHRINK_ABORT: no collective over the broken one) and go on on the
// child, every result checked; over sockets and over shared memory; and over sockets the other
// way, recclCommRevoke and then a RECCL_SHRINK_DEFAULT shrink.
TEST(CclErrors, SurvivorsOfAKilledRankShrinkAndGoOn) {
  struct Run {
    const char* shm;
    const char* shrink;  // WORKER_SHRINK: 1 (RECCL_SHRINK_ABORT) or revoke (recclCommRevoke, then DEFAULT)
  };
  for (const Run& run : {Run{"1", "1"}, Run{"0", "1"}, Run{"0", "revoke"}}) {
    const char* shm = run.shm;
    Workers w;
    uint16_t port = freePort();
    std::vector<std::string> extra = {"WORKER_ITERS=20", "WORKER_COUNT=100003", "RECCL_TIMEOUT_MS=3000",
                                      "WORKER_DIE_RANK=1", "WORKER_DIE_ITER=3",
                                      std::string("WORKER_SHRINK=") + run.shrink,
                                      std::string("RECCL_SHM_DISABLE=") + shm, "RECCL_DEBUG=NONE"};
    std::vector<pid_t> pids;
    std::vector<std::string> logs;
    for (int r = 0; r < 4; ++r) {
      logs.push_back(::testing::TempDir() + "shrink_worker_" + std::to_string(getpid()) + "_" + shm + "_" +
                     std::to_string(r) + ".log");
      pids.push_back(w.spawn(r, 4, port, extra, logs.back()));
    }
    EXPECT_EQ(w.wait(pids[1], Ms(60000)), 128 + SIGKILL) << "shm=" << shm;
    for (int r : {0, 2, 3}) {
      int code = w.wait(pids[r], Ms(30000));
      std::ifstream in(logs[r]);
      std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_EQ(code, 0) << "shm=" << shm << " rank " << r << ":\n" << log;
      EXPECT_NE(log.find("shrunk rank " + std::to_string(r == 0 ? 0 : r - 1) + " of 3 (was " + std::to_string(r) + ")"),
                std::string::npos)
          << "shm=" << shm << " rank " << r << ":\n" << log;
      // Revoked, the communicator the death broke is quiet: recclSuccess, not the death's error
      // (which recclCommGetAsyncError reports without the revoke).
      if (std::string(run.shrink) == "revoke") {
        EXPECT_NE(log.find("revoked: no error"), std::string::npos) << "rank " << r << ":\n" << log;
      }
    }
    for (const auto& l : logs) std::remove(l.c_str());
  }
}

// The failover monitor's lines about a peer's close: (level, line).
class PeerCloseLines {
 public:
  PeerCloseLines() {
    debug_.emplace("RECCL_DEBUG", "INFO");
    reccl::logReloadEnv();
    reccl::logSetSink([this](reccl::LogLevel level, std::string_view line) {
      if (line.find("peer close on") == std::string_view::npos) return;
      std::lock_guard lk(mu_);
      lines_.emplace_back(level, std::string(line));
    });
  }
  ~PeerCloseLines() {
    reccl::logSetSink(nullptr);
    debug_.reset();
    reccl::logReloadEnv();
  }
  // Waits up to 5 s for the first line; its level, kNone when none came.
  reccl::LogLevel first(std::string* line) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard lk(mu_);
        if (!lines_.empty()) {
          *line = lines_.front().second;
          return lines_.front().first;
        }
      }
      std::this_thread::sleep_for(Ms(10));
    }
    return reccl::LogLevel::kNone;
  }

 private:
  std::optional<ScopedEnv> debug_;
  std::mutex mu_;
  std::vector<std::pair<reccl::LogLevel, std::string>> lines_;
};

// A peer that destroys its communicator while this rank's is idle (it finished first, an
// orderly teardown) closes its connections just as a dead peer's kernel does. That is no fault:
// said at INFO, not as a warning on every job whose ranks end at different times; the
// counters say it (lostConnections), and the next call fails with it. The same close during a
// call stays a warning.
TEST(CclErrors, APeersDestroyIsAWarningOnlyWhileACallWaitsForIt) {
  ScopedEnv tcp("RECCL_SHM_DISABLE", "1");
  ScopedEnv t("RECCL_TIMEOUT_MS", "20000");
  for (bool inCall : {false, true}) {
    Comms comms(2);
    ASSERT_TRUE(comms.ok()) << comms.error();
    auto rcs = comms.run([](int, recclComm_t c) {  // connects the ranks
      float x[64] = {};
      return recclAllReduce(x, x, 64, recclFloat32, recclSum, c, nullptr);
    });
    ASSERT_EQ(rcs[0], recclSuccess);
    ASSERT_EQ(rcs[1], recclSuccess);
    PeerCloseLines lines;
    recclResult_t rc = recclSuccess;
    std::atomic<bool> calling{false};
    std::thread rank1([&] {
      if (!inCall) return;
      float x[64] = {};
      calling = true;
      rc = recclAllReduce(x, x, 64, recclFloat32, recclSum, comms[1], nullptr);
    });
    if (inCall) {
      while (!calling.load()) std::this_thread::sleep_for(Ms(1));
      std::this_thread::sleep_for(Ms(200));  // inside the call, waiting for rank 0
    }
    ASSERT_EQ(recclCommDestroy(comms[0]), recclSuccess) << lastError();
    comms.forget(0);
    std::string line;
    reccl::LogLevel level = lines.first(&line);
    rank1.join();
    ASSERT_NE(level, reccl::LogLevel::kNone) << "rank 1 said nothing of rank 0's close";
    EXPECT_EQ(level, inCall ? reccl::LogLevel::kWarn : reccl::LogLevel::kInfo) << line;
    if (!inCall) {
      // No async error (as NCCL: nothing failed yet), but the counters say it.
      recclResult_t async = recclInternalError;
      ASSERT_EQ(recclCommGetAsyncError(comms[1], &async), recclSuccess);
      EXPECT_EQ(async, recclSuccess) << lastError();
      // The line is logged before the port is failed: the counters follow within moments.
      recclCommStats_t st{};
      int lost = 0;
      for (int i = 0; i < 500 && !lost; ++i) {
        ASSERT_EQ(recclCommPeerLost(comms[1], 0, &lost), recclSuccess);
        if (!lost) std::this_thread::sleep_for(Ms(10));
      }
      EXPECT_EQ(lost, 1);
      st.size = sizeof(st);
      ASSERT_EQ(recclCommGetStats(comms[1], &st), recclSuccess);
      EXPECT_GE(st.lostConnections, 1u);
      EXPECT_EQ(st.firstLostPeer, 0);
      EXPECT_EQ(recclCommPeerLost(comms[1], 2, &lost), recclInvalidArgument);
      EXPECT_NE(lastError().find("peer: 2 is not a rank of this communicator"), std::string::npos) << lastError();
      float x[64] = {};
      rc = recclAllReduce(x, x, 64, recclFloat32, recclSum, comms[1], nullptr);
    }
    EXPECT_EQ(rc, recclRemoteError) << (inCall ? "in the call" : "the next call") << ": " << lastError();
  }
}

// The loss is counted for the peer that went, not for every peer: of three ranks, rank 0's
// destroy while idle is lost to ranks 1 and 2 as rank 0 only, and their connection to each other
// stays whole (recclCommPeerLost says 0 for it, the stats name rank 0 first).
TEST(CclErrors, APeersDestroyIsLostForThatPeerAlone) {
  ScopedEnv tcp("RECCL_SHM_DISABLE", "1");
  ScopedEnv t("RECCL_TIMEOUT_MS", "20000");
  Comms comms(3);
  ASSERT_TRUE(comms.ok()) << comms.error();
  auto rcs = comms.run([](int, recclComm_t c) {  // connects every pair: an all-to-all
    float in[3 * 16] = {}, out[3 * 16] = {};
    return recclAlltoAll(in, out, 16, recclFloat32, c, nullptr);
  });
  for (int r = 0; r < 3; ++r) ASSERT_EQ(rcs[r], recclSuccess) << "rank " << r;
  ASSERT_EQ(recclCommDestroy(comms[0]), recclSuccess) << lastError();
  comms.forget(0);
  for (int r : {1, 2}) {
    int lost = 0;
    for (int i = 0; i < 500 && !lost; ++i) {
      ASSERT_EQ(recclCommPeerLost(comms[r], 0, &lost), recclSuccess);
      if (!lost) std::this_thread::sleep_for(Ms(10));
    }
    EXPECT_EQ(lost, 1) << "rank " << r << " did not count rank 0 as lost";
  }
  std::this_thread::sleep_for(Ms(300));  // time for a wrong count to show
  for (int r : {1, 2}) {
    const int other = 3 - r;
    int lost = -1;
    ASSERT_EQ(recclCommPeerLost(comms[r], other, &lost), recclSuccess);
    EXPECT_EQ(lost, 0) << "rank " << r << " counts rank " << other << " as lost; only rank 0 went";
    recclCommStats_t st{};
    st.size = sizeof(st);
    ASSERT_EQ(recclCommGetStats(comms[r], &st), recclSuccess);
    EXPECT_EQ(st.firstLostPeer, 0) << "rank " << r;
    EXPECT_GE(st.lostConnections, 1u) << "rank " << r;
  }
}

}  // namespace
