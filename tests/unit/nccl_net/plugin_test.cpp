// libnccl-net-reccl.so through NCCL's v8 table, loaded with dlopen as NCCL loads it. Both comms
// of a connection live in this process, as in NCCL's own GPU Direct check; the connection is a
// real reccl communicator over TCP sockets (shared memory in one case).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl_net_abi.h"
#include "reccl/nccl_net_plugin.h"

namespace {

using Clock = std::chrono::steady_clock;

std::mutex logMu;
std::string logText;

void captureLog(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN) return;
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  std::lock_guard lk(logMu);
  logText += std::string(line) + "\n";
}

std::string warnings() {
  std::lock_guard lk(logMu);
  return logText;
}

class NcclNetPlugin : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Sockets between the two comms (a real TCP connection), and no detector to load for each
    // communicator: failover under faults is the testbed test's (nccl_net_fault_test).
    setenv("RECCL_SHM_DISABLE", "1", 1);
    setenv("RECCL_DETECTOR", "poll", 1);
    setenv("RECCL_BOOTSTRAP_TIMEOUT_MS", "5000", 1);
    lib_ = dlopen(RECCL_NCCL_NET_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    net_ = static_cast<ncclNet_v8_t*>(dlsym(lib_, "ncclNetPlugin_v8"));
    stats_ = reinterpret_cast<recclNetCommStats_t>(dlsym(lib_, "recclNetCommStats"));
    ASSERT_NE(net_, nullptr);
    ASSERT_NE(stats_, nullptr);
    ASSERT_EQ(net_->init(captureLog), ncclSuccess) << warnings();
  }

  // Each test's log checks see its own lines only.
  void SetUp() override {
    std::lock_guard lk(logMu);
    logText.clear();
  }

  // A connected pair: *send and *recv, made as NCCL makes them (connect and accept polled).
  void connectPair(void** send, void** recv) {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    ASSERT_EQ(net_->listen(0, handle, &listen), ncclSuccess) << warnings();
    *send = *recv = nullptr;
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!*send || !*recv) {
      if (!*send) {
        ASSERT_EQ(net_->connect(0, handle, send, nullptr), ncclSuccess) << warnings();
      }
      if (!*recv) {
        ASSERT_EQ(net_->accept(listen, recv, nullptr), ncclSuccess) << warnings();
      }
      ASSERT_LT(Clock::now(), deadline) << "connect/accept did not finish";
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ASSERT_EQ(net_->closeListen(listen), ncclSuccess);
  }

  // One receive of up to `size` bytes into `buf`: irecv's code.
  ncclResult_t postRecv(void* recv, void* buf, int size, void** request, int tag = 0) {
    return net_->irecv(recv, 1, &buf, &size, &tag, nullptr, request);
  }

  // Both comms of a pair closed, the send comm first.
  void closePair(void* send, void* recv) {
    EXPECT_EQ(net_->closeSend(send), ncclSuccess);
    EXPECT_EQ(net_->closeRecv(recv), ncclSuccess);
  }

  // Polls until done or an error; the code test() returned.
  ncclResult_t wait(void* request, int* size, std::chrono::seconds limit = std::chrono::seconds(30)) {
    auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      int done = 0;
      ncclResult_t r = net_->test(request, &done, size);
      if (r != ncclSuccess || done) return r;
      std::this_thread::yield();
    }
    ADD_FAILURE() << "request not done within " << limit.count() << " s";
    return ncclInternalError;
  }

  inline static void* lib_ = nullptr;
  inline static ncclNet_v8_t* net_ = nullptr;
  inline static recclNetCommStats_t stats_ = nullptr;
};

// A host-memory device per NIC by default, named after it; RECCL_NET_DEVICES=fused: one device
// over the same NICs; another value fails init naming the variable and leaves the devices as
// they were.
TEST_F(NcclNetPlugin, OffersADevicePerNicOrOneFusedDevice) {
  EXPECT_STREQ(net_->name, "reccl");
  int ndev = 0;
  ASSERT_EQ(net_->devices(&ndev), ncclSuccess);
  ASSERT_GE(ndev, 1);
  std::string fusedName = "reccl:";
  for (int d = 0; d < ndev; ++d) {
    ncclNetProperties_v8_t p;
    ASSERT_EQ(net_->getProperties(d, &p), ncclSuccess) << warnings();
    const std::string name = p.name;
    ASSERT_EQ(name.rfind("reccl:", 0), 0u) << name;
    EXPECT_EQ(name.find('+'), std::string::npos) << name;
    fusedName += (d ? "+" : "") + name.substr(6);
    EXPECT_EQ(p.guid, static_cast<uint64_t>(d));
    EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
    EXPECT_EQ(p.maxRecvs, 1);
    EXPECT_GT(p.speed, 0);
    EXPECT_GT(p.maxComms, 0);
    EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
  }
  ncclNetProperties_v8_t p;
  EXPECT_EQ(net_->getProperties(ndev, &p), ncclInvalidArgument);
  EXPECT_NE(warnings().find("no device " + std::to_string(ndev)), std::string::npos) << warnings();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  int sentinel = 0;
  void* comm = &sentinel;
  EXPECT_EQ(net_->listen(ndev, handle, &comm), ncclInvalidArgument);
  EXPECT_EQ(comm, &sentinel) << "a refused listen set its comm";
  EXPECT_EQ(net_->connect(-1, handle, &comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(comm, nullptr) << "a refused connect left its comm unset";

  // The default devices again after this test, also when it fails.
  struct Restore {
    int ndev;
    ~Restore() {
      unsetenv("RECCL_NET_DEVICES");
      EXPECT_EQ(net_->init(captureLog), ncclSuccess) << warnings();
      int n = 0;
      EXPECT_EQ(net_->devices(&n), ncclSuccess);
      EXPECT_EQ(n, ndev) << "the per-NIC devices after init again";
    }
  } restore{ndev};
  setenv("RECCL_NET_DEVICES", "fused", 1);
  ASSERT_EQ(net_->init(captureLog), ncclSuccess) << warnings();
  int fused = 0;
  EXPECT_EQ(net_->devices(&fused), ncclSuccess);
  EXPECT_EQ(fused, 1);
  ASSERT_EQ(net_->getProperties(0, &p), ncclSuccess);
  EXPECT_EQ(std::string(p.name), fusedName);
  setenv("RECCL_NET_DEVICES", "per-gpu", 1);
  EXPECT_EQ(net_->init(captureLog), ncclInvalidUsage);
  EXPECT_NE(warnings().find("RECCL_NET_DEVICES"), std::string::npos) << warnings();
  EXPECT_EQ(net_->devices(&fused), ncclSuccess);
  EXPECT_EQ(fused, 1) << "a failed init changed the devices";
}

// Every size NCCL sends, each into a receive posted for more: the bytes and the size that
// test() reports are the sender's.
TEST_F(NcclNetPlugin, MessagesArriveWholeAndShortOfThePostedSize) {
  void *send, *recv;
  connectPair(&send, &recv);
  const std::vector<int> sizes = {0, 1, 7, 4096, 65537, 1 << 20, (4 << 20) + 3};
  const int capacity = (4 << 20) + 64;
  std::vector<std::vector<uint8_t>> out(sizes.size()), in(sizes.size(), std::vector<uint8_t>(capacity, 0xee));
  std::vector<void*> sreq(sizes.size()), rreq(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i].resize(sizes[i]);
    for (int b = 0; b < sizes[i]; ++b) out[i][b] = static_cast<uint8_t>(i * 37 + b * 11);
    ASSERT_EQ(postRecv(recv, in[i].data(), capacity, &rreq[i], 7), ncclSuccess) << warnings();
    ASSERT_EQ(net_->isend(send, out[i].data(), sizes[i], 7, nullptr, &sreq[i]), ncclSuccess) << warnings();
    ASSERT_NE(sreq[i], nullptr);
    ASSERT_NE(rreq[i], nullptr);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    int got = -1;
    ASSERT_EQ(wait(sreq[i], nullptr), ncclSuccess) << warnings();
    ASSERT_EQ(wait(rreq[i], &got), ncclSuccess) << warnings();
    EXPECT_EQ(got, sizes[i]);
    if (sizes[i] > 0) {
      EXPECT_EQ(0, std::memcmp(in[i].data(), out[i].data(), sizes[i])) << "message " << i;
    }
    EXPECT_EQ(in[i][sizes[i]], 0xee) << "message " << i << " wrote past its size";
  }
  recclCommStats_t s{};
  s.size = sizeof(s);
  ASSERT_EQ(stats_(send, &s), 0);
  EXPECT_GT(s.bytesSent, 0u);
  closePair(send, recv);
}

// NCCL keeps at most NCCL_NET_MAX_REQUESTS in flight; one more is "not now" (a NULL request),
// and a slot freed by test() is taken again.
TEST_F(NcclNetPlugin, APostBeyondTheRequestLimitIsRefusedUntilOneEnds) {
  void *send, *recv;
  connectPair(&send, &recv);
  int byte = 0;
  std::vector<void*> reqs;
  for (int i = 0; i < NCCL_NET_MAX_REQUESTS; ++i) {
    void* r = nullptr;
    ASSERT_EQ(postRecv(recv, &byte, 4, &r), ncclSuccess);
    ASSERT_NE(r, nullptr) << "request " << i;
    reqs.push_back(r);
  }
  void* extra = &byte;
  ASSERT_EQ(postRecv(recv, &byte, 4, &extra), ncclSuccess);
  EXPECT_EQ(extra, nullptr);
  uint32_t word = 0x01020304;
  void* sreq = nullptr;
  ASSERT_EQ(net_->isend(send, &word, 4, 0, nullptr, &sreq), ncclSuccess);
  ASSERT_EQ(wait(sreq, nullptr), ncclSuccess);
  int got = -1;
  ASSERT_EQ(wait(reqs[0], &got), ncclSuccess);
  EXPECT_EQ(got, 4);
  ASSERT_EQ(postRecv(recv, &byte, 4, &extra), ncclSuccess);
  EXPECT_NE(extra, nullptr);
  // The 32 receives still posted end with the close, which must not wait for them.
  auto t0 = Clock::now();
  EXPECT_EQ(net_->closeRecv(recv), ncclSuccess);
  EXPECT_EQ(net_->closeSend(send), ncclSuccess);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
}

// A message larger than its receive fails that receive with the sizes, and the sender learns
// that its peer gave up (a request fails) instead of waiting for a receive. A send completes
// once its step is in the sender's slots, so the sender may run ahead of the failed receiver by
// its slots (two here, on one channel) before a send has to wait for the receiver, and that
// wait ends with the peer's failure.
TEST_F(NcclNetPlugin, AMessageLargerThanItsReceiveFailsBothEnds) {
  constexpr int kSlots = 2;
  setenv("RECCL_SLOTS", std::to_string(kSlots).c_str(), 1);
  setenv("RECCL_NCHANNELS", "1", 1);
  void *send, *recv;
  connectPair(&send, &recv);
  unsetenv("RECCL_SLOTS");
  unsetenv("RECCL_NCHANNELS");
  std::vector<uint8_t> out(200, 1), in(100);
  void *rreq = nullptr, *sreq = nullptr;
  ASSERT_EQ(postRecv(recv, in.data(), 100, &rreq), ncclSuccess);
  ASSERT_EQ(net_->isend(send, out.data(), 200, 0, nullptr, &sreq), ncclSuccess);
  int got = -1;
  EXPECT_EQ(wait(rreq, &got), ncclInvalidUsage);
  EXPECT_NE(warnings().find("a message of 200 bytes arrived for a receive of 100 bytes"), std::string::npos)
      << warnings();
  ncclResult_t r = wait(sreq, nullptr);
  int sent = r == ncclSuccess ? 1 : 0;
  // One send more than the slots can hold must fail: the sends ahead fill the slots at most.
  for (int i = 0; i < kSlots + 1 && r == ncclSuccess; ++i) {
    ASSERT_EQ(net_->isend(send, out.data(), 200, 0, nullptr, &sreq), ncclSuccess);
    ASSERT_NE(sreq, nullptr);
    r = wait(sreq, nullptr);
    if (r == ncclSuccess) ++sent;
  }
  EXPECT_EQ(r, ncclRemoteError) << sent << " sends completed after the receiver failed\n" << warnings();
  void* again = nullptr;
  EXPECT_NE(postRecv(recv, in.data(), 100, &again), ncclSuccess);
  closePair(send, recv);
}

// A receive posted long before its message waits for it: NCCL posts receives ahead, and an
// application may pause between collectives for longer than a collective's deadline. The stall
// check (a channel with no progress) must not take the idle wait for a dead path either.
TEST_F(NcclNetPlugin, AReceiveWaitsForItsMessageAsLongAsItTakes) {
  setenv("RECCL_STALL_TIMEOUT_MS", "200", 1);
  void *send, *recv;
  connectPair(&send, &recv);
  unsetenv("RECCL_STALL_TIMEOUT_MS");
  uint64_t in = 0, out = 0x1122334455667788ull;
  void *rreq = nullptr, *sreq = nullptr;
  ASSERT_EQ(postRecv(recv, &in, 8, &rreq), ncclSuccess);
  auto until = Clock::now() + std::chrono::milliseconds(1500);
  while (Clock::now() < until) {
    int done = 1;
    ASSERT_EQ(net_->test(rreq, &done, nullptr), ncclSuccess) << warnings();
    ASSERT_EQ(done, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(net_->isend(send, &out, 8, 0, nullptr, &sreq), ncclSuccess);
  ASSERT_EQ(wait(sreq, nullptr), ncclSuccess);
  ASSERT_EQ(wait(rreq, nullptr), ncclSuccess);
  EXPECT_EQ(in, out);
  recclCommStats_t s{};
  s.size = sizeof(s);
  ASSERT_EQ(stats_(recv, &s), 0);
  EXPECT_EQ(s.failovers, 0u) << "the idle wait was taken for a stalled path";
  closePair(send, recv);
}

// RECCL_TIMEOUT_MS, when the user sets it, bounds a receive as it bounds any reccl call.
TEST_F(NcclNetPlugin, RecclTimeoutBoundsAReceiveWhenSet) {
  setenv("RECCL_TIMEOUT_MS", "300", 1);
  void *send, *recv;
  connectPair(&send, &recv);
  unsetenv("RECCL_TIMEOUT_MS");
  uint64_t in = 0;
  void* rreq = nullptr;
  ASSERT_EQ(postRecv(recv, &in, 8, &rreq), ncclSuccess);
  auto t0 = Clock::now();
  EXPECT_EQ(wait(rreq, nullptr, std::chrono::seconds(20)), ncclRemoteError);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  EXPECT_NE(warnings().find("timeout"), std::string::npos) << warnings();
  closePair(send, recv);
}

// A peer that closes its comm while this end waits: the waiting request fails, within the
// failover's bound, as a remote error.
TEST_F(NcclNetPlugin, APeerThatClosesFailsTheWaitingRequest) {
  void *send, *recv;
  connectPair(&send, &recv);
  uint64_t in = 0;
  void* rreq = nullptr;
  ASSERT_EQ(postRecv(recv, &in, 8, &rreq), ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(net_->closeSend(send), ncclSuccess);
  EXPECT_EQ(wait(rreq, nullptr, std::chrono::seconds(20)), ncclRemoteError) << warnings();
  EXPECT_EQ(net_->closeRecv(recv), ncclSuccess);
}

TEST_F(NcclNetPlugin, BadArgumentsAreRefusedWithTheirReason) {
  void *send, *recv;
  connectPair(&send, &recv);
  int buf[4];
  void* mh = nullptr;
  EXPECT_EQ(net_->regMr(send, buf, sizeof buf, NCCL_PTR_CUDA, &mh), ncclInvalidArgument);
  EXPECT_NE(warnings().find("host memory only"), std::string::npos) << warnings();
  EXPECT_NE(net_->regMrDmaBuf(send, buf, sizeof buf, NCCL_PTR_DMABUF, 0, 3, &mh), ncclSuccess);
  ASSERT_EQ(net_->regMr(send, buf, sizeof buf, NCCL_PTR_HOST, &mh), ncclSuccess);
  EXPECT_EQ(net_->deregMr(send, mh), ncclSuccess);
  void* data[2] = {buf, buf + 2};
  int sizes[2] = {8, 8}, tags[2] = {0, 0};
  void* req = nullptr;
  EXPECT_EQ(net_->irecv(recv, 2, data, sizes, tags, nullptr, &req), ncclInvalidArgument);
  EXPECT_NE(warnings().find("2 grouped receives"), std::string::npos) << warnings();
  EXPECT_EQ(net_->isend(send, buf, -1, 0, nullptr, &req), ncclInvalidArgument);
  EXPECT_EQ(net_->isend(recv, buf, 4, 0, nullptr, &req), ncclInvalidArgument) << "a receive comm is no send comm";
  EXPECT_NE(net_->iflush(recv, 1, data, sizes, nullptr, &req), ncclSuccess);
  closePair(send, recv);
}

// NCCL tags a connection's messages with the sender's rank at both ends: a message tagged
// otherwise is another's, and its receive fails with both tags.
TEST_F(NcclNetPlugin, AMessageWithAnotherTagFailsItsReceive) {
  void *send, *recv;
  connectPair(&send, &recv);
  uint64_t in = 0, out = 42;
  void *rreq = nullptr, *sreq = nullptr;
  ASSERT_EQ(postRecv(recv, &in, 8, &rreq, 2), ncclSuccess);
  ASSERT_EQ(net_->isend(send, &out, 8, 1, nullptr, &sreq), ncclSuccess);
  EXPECT_EQ(wait(rreq, nullptr), ncclInvalidUsage);
  EXPECT_NE(warnings().find("a message tagged 1 arrived for a receive tagged 2"), std::string::npos) << warnings();
  closePair(send, recv);
}

// NCCL's teardown after an abort closes comms whose requests are still running, at any point of
// a message (between its header and its bytes too); a close must end them without touching a
// freed communicator (the sanitizer trees run this) and without waiting for the peer.
TEST_F(NcclNetPlugin, ClosingMidMessageEndsItWithoutWaiting) {
  const int bytes = 32 << 20;
  std::vector<uint8_t> out(bytes, 7), in(bytes);
  for (int round = 0; round < 8; ++round) {
    void *send, *recv;
    connectPair(&send, &recv);
    void *rreq = nullptr, *sreq = nullptr;
    ASSERT_EQ(postRecv(recv, in.data(), bytes, &rreq), ncclSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));  // the header's wait
    ASSERT_EQ(net_->isend(send, out.data(), bytes, 0, nullptr, &sreq), ncclSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(round * 3));
    auto t0 = Clock::now();
    if (round % 2) {
      closePair(send, recv);
    } else {
      EXPECT_EQ(net_->closeRecv(recv), ncclSuccess);
      EXPECT_EQ(net_->closeSend(send), ncclSuccess);
    }
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5)) << "round " << round;
  }
}

// NCCL's proxy connects and closes on one thread and drives requests on another; here the two
// directions' requests run on threads of their own while this one reads the counters.
TEST_F(NcclNetPlugin, RequestsDrivenFromOtherThreadsArriveInOrder) {
  void *send, *recv;
  connectPair(&send, &recv);
  const int messages = 200;
  std::string senderError, receiverError;
  std::thread sender([&] {
    std::vector<uint32_t> word(1024);
    for (int i = 0; i < messages && senderError.empty(); ++i) {
      std::fill(word.begin(), word.end(), static_cast<uint32_t>(i));
      void* req = nullptr;
      if (net_->isend(send, word.data(), 4 * (1 + i % 1024), 0, nullptr, &req) != ncclSuccess || !req)
        senderError = "isend " + std::to_string(i);
      else if (wait(req, nullptr) != ncclSuccess)
        senderError = "send " + std::to_string(i);
    }
  });
  std::thread receiver([&] {
    std::vector<uint32_t> word(1024);
    for (int i = 0; i < messages && receiverError.empty(); ++i) {
      int got = -1;
      void* req = nullptr;
      if (postRecv(recv, word.data(), 4096, &req) != ncclSuccess || !req)
        receiverError = "irecv " + std::to_string(i);
      else if (wait(req, &got) != ncclSuccess || got != 4 * (1 + i % 1024) ||
               word[static_cast<size_t>(got / 4 - 1)] != static_cast<uint32_t>(i))
        receiverError = "message " + std::to_string(i) + " (" + std::to_string(got) + " bytes)";
    }
  });
  while (senderError.empty() && receiverError.empty()) {
    recclCommStats_t st{};
    st.size = sizeof(st);
    if (stats_(recv, &st) == 0 && st.bytesReceived > 0) break;
    std::this_thread::yield();
  }
  sender.join();
  receiver.join();
  EXPECT_EQ(senderError, "");
  EXPECT_EQ(receiverError, "") << warnings();
  closePair(send, recv);
}

// NCCL frees a connect's handle when it gives the connect up, and may reuse the address for
// another one: a pending connect found under the address with other bytes is ended, and the new
// handle's connect made.
TEST_F(NcclNetPlugin, AReusedHandleAddressConnectsToTheNewListener) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenA = nullptr;
  ASSERT_EQ(net_->listen(0, handle, &listenA), ncclSuccess);
  void* send = nullptr;
  ASSERT_EQ(net_->connect(0, handle, &send, nullptr), ncclSuccess);  // pending: A never accepts
  ASSERT_EQ(send, nullptr);
  void* listenB = nullptr;
  ASSERT_EQ(net_->listen(0, handle, &listenB), ncclSuccess);  // the same buffer, B's handle now
  void* recv = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!send || !recv) {
    if (!send) {
      ASSERT_EQ(net_->connect(0, handle, &send, nullptr), ncclSuccess) << warnings();
    }
    if (!recv) {
      ASSERT_EQ(net_->accept(listenB, &recv, nullptr), ncclSuccess) << warnings();
    }
    ASSERT_LT(Clock::now(), deadline) << "connect/accept did not finish";
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  uint64_t in = 0, out = 0xabcdef;
  void *rreq = nullptr, *sreq = nullptr;
  ASSERT_EQ(postRecv(recv, &in, 8, &rreq), ncclSuccess);
  ASSERT_EQ(net_->isend(send, &out, 8, 0, nullptr, &sreq), ncclSuccess);
  ASSERT_EQ(wait(sreq, nullptr), ncclSuccess);
  ASSERT_EQ(wait(rreq, nullptr), ncclSuccess);
  EXPECT_EQ(in, out);
  closePair(send, recv);
  EXPECT_EQ(net_->closeListen(listenA), ncclSuccess);
  EXPECT_EQ(net_->closeListen(listenB), ncclSuccess);
}

// A handle that is no listener's: connect fails with reccl's reason, not a hang.
TEST_F(NcclNetPlugin, AConnectToAForeignHandleFails) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  std::memset(handle, 0x5a, sizeof handle);
  void* send = nullptr;
  ncclResult_t r = ncclSuccess;
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (r == ncclSuccess && !send && Clock::now() < deadline) {
    r = net_->connect(0, handle, &send, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_NE(r, ncclSuccess);
  EXPECT_EQ(send, nullptr);
  EXPECT_NE(warnings().find("connect: "), std::string::npos) << warnings();
}

// Shared memory between the two comms (same host): the same bytes arrive.
TEST_F(NcclNetPlugin, SameHostPairsMoveBytesOverSharedMemory) {
  setenv("RECCL_SHM_DISABLE", "0", 1);
  void *send, *recv;
  connectPair(&send, &recv);
  setenv("RECCL_SHM_DISABLE", "1", 1);
  std::vector<uint8_t> out(3 << 20), in(4 << 20);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 13);
  int got = -1;
  void *rreq = nullptr, *sreq = nullptr;
  ASSERT_EQ(postRecv(recv, in.data(), static_cast<int>(in.size()), &rreq), ncclSuccess);
  ASSERT_EQ(net_->isend(send, out.data(), static_cast<int>(out.size()), 0, nullptr, &sreq), ncclSuccess);
  ASSERT_EQ(wait(sreq, nullptr), ncclSuccess);
  ASSERT_EQ(wait(rreq, &got), ncclSuccess);
  EXPECT_EQ(got, static_cast<int>(out.size()));
  EXPECT_EQ(0, std::memcmp(in.data(), out.data(), out.size()));
  closePair(send, recv);
}

}  // namespace
