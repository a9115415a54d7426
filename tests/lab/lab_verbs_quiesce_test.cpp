// What a QP moved to ERR can still let land, between two lab hosts: rank 0 streams RDMA writes
// into a buffer of rank 1, and rank 1 moves its QP to ERR in the middle of the stream. The
// failover's rule (Path::stopLanding) is that once the receive queue of that QP has flushed nothing
// lands any more; this checks it byte for byte, and counts, beside it, how often something
// landed after the move to ERR alone (the window the flush closes; informational, timing-bound).
// Same binary and boot as lab_verbs_test.cpp.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "reccl/common/deadline.h"
#include "transport/verbs/conn_info.h"
#include "verbs_lab_util.h"

namespace reccl::lab {
namespace {

constexpr size_t kBufBytes = size_t{1} << 20;
constexpr size_t kWriteBytes = size_t{256} << 10;  // many packets per write at any MTU
// Three sources into four regions: each write brings a region a value it did not hold.
constexpr int kSources = 3;

// A registered anonymous mapping, deregistered and unmapped when it goes.
class Region {
 public:
  Region(ibv_pd* pd, size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    mem_ = static_cast<std::byte*>(p);
    mr_ = ibv_reg_mr(pd, mem_, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  }
  ~Region() {
    if (mr_) ibv_dereg_mr(mr_);
    if (mem_) munmap(mem_, bytes_);
  }
  bool ok() const noexcept { return mr_ != nullptr; }
  std::byte* data() const noexcept { return mem_; }
  ibv_mr* mr() const noexcept { return mr_; }

 private:
  size_t bytes_;
  std::byte* mem_ = nullptr;
  ibv_mr* mr_ = nullptr;
};

size_t differing(const std::byte* a, const std::byte* b, size_t n) {
  size_t d = 0;
  for (size_t i = 0; i < n; ++i) d += a[i] != b[i];
  return d;
}

TEST_F(VerbsLab, NothingLandsAfterTheReceiveQueueOfAQpInErrFlushed) {
  const int rounds = envInt("RECCL_LAB_QUIESCE_ROUNDS", 24);
  const bool writer = peer_->rank() == 0;
  RailDevice& dev = *rails_[0];
  Region local(dev.pd(), writer ? kWriteBytes * kSources : kBufBytes);
  ASSERT_TRUE(local.ok()) << "registering the test buffer on " << dev.port().device << ": " << strerror(errno);
  if (writer)
    for (int s = 0; s < kSources; ++s) std::memset(local.data() + s * kWriteBytes, 0x10 + s, kWriteBytes);
  std::vector<std::byte> before(kBufBytes), after(kBufBytes);
  std::mt19937 rng(static_cast<uint32_t>(monotonicNs()));
  int lateAfterErr = 0, errRounds = 0, lateAfterFlush = 0;
  std::vector<uint64_t> flushUs;
  for (int r = 0; r < rounds; ++r) {
    SCOPED_TRACE("round " + std::to_string(r));
    // Odd rounds: the move to ERR alone; even rounds: the move and the receive queue's flush.
    const bool flush = r % 2 == 0;
    auto qp = RcQp::create(dev, {16, 16});
    ASSERT_TRUE(qp.ok()) << qp.status().message();
    ConnInfo mine;
    mine.role = writer ? ConnRole::kSender : ConnRole::kReceiver;
    mine.rail = 0;
    mine.addr = reinterpret_cast<uint64_t>(local.data());
    mine.rkey = local.mr()->rkey;
    mine.slots = 1;
    mine.chunkBytes = kBufBytes;
    (*qp)->fillLocal(mine);
    std::array<std::byte, kConnInfoBytes> rec;
    encodeConnInfo(mine, rec);
    auto theirBytes = peer_->exchange(rec);
    ASSERT_TRUE(theirBytes.ok()) << theirBytes.status().message();
    auto theirs = decodeConnInfo(*theirBytes);
    ASSERT_TRUE(theirs.ok()) << theirs.status().message();
    ASSERT_TRUE((*qp)->connect(*theirs, {}).ok());
    if (!writer) std::memset(local.data(), 0, kBufBytes);
    ASSERT_TRUE(peer_->barrier(0x51e00000 + r).ok());
    if (writer) {
      // Writes back to back (the sources in turn) until the target says it is done; the writes
      // after its move to ERR fail or never complete, and the QP goes to ERR here too.
      std::atomic<bool> stop{false};
      std::thread t([&] {
        uint64_t n = 0;
        ibv_wc wc[16];
        while (!stop.load(std::memory_order_acquire)) {
          if ((*qp)->sendsOutstanding() < 8) {
            ibv_sge sge{reinterpret_cast<uint64_t>(local.data() + (n % kSources) * kWriteBytes),
                        static_cast<uint32_t>(kWriteBytes), local.mr()->lkey};
            ibv_send_wr wr{};
            wr.wr_id = n;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.opcode = IBV_WR_RDMA_WRITE;
            wr.wr.rdma.remote_addr = theirs->addr + (n % (kBufBytes / kWriteBytes)) * kWriteBytes;
            wr.wr.rdma.rkey = theirs->rkey;
            if ((*qp)->post(wr).ok()) ++n;
          }
          if ((*qp)->poll(wc) == 0) std::this_thread::yield();
        }
      });
      Status done = peer_->barrier(0x51f00000 + r);
      stop.store(true, std::memory_order_release);
      t.join();
      ASSERT_TRUE(done.ok()) << done.message();
      ASSERT_TRUE((*qp)->drain(Deadline::afterMs(10'000), [](const ibv_wc&) {}).ok());
      continue;
    }
    // The target: once the stream is landing, a pause of up to 2 ms, then ERR in its middle.
    Deadline started = Deadline::afterMs(20'000);
    while (local.data()[0] == std::byte{0} && !started.expired()) std::this_thread::yield();
    ASSERT_NE(local.data()[0], std::byte{0}) << "no write landed in 20 s";
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    const uint64_t t0 = monotonicNs();
    if (flush) {
      Status s = (*qp)->drainReceives(Deadline::afterMs(10'000));
      ASSERT_TRUE(s.ok()) << s.message();
      flushUs.push_back((monotonicNs() - t0) / 1000);
    } else {
      ASSERT_TRUE((*qp)->toError().ok());
    }
    std::memcpy(before.data(), local.data(), kBufBytes);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::memcpy(after.data(), local.data(), kBufBytes);
    const size_t late = differing(before.data(), after.data(), kBufBytes);
    if (flush) {
      EXPECT_EQ(late, 0u) << late << " bytes landed after the receive queue flushed";
      lateAfterFlush += late > 0;
    } else {
      ++errRounds;
      lateAfterErr += late > 0;
    }
    ASSERT_TRUE(peer_->barrier(0x51f00000 + r).ok());
    ASSERT_TRUE((*qp)->drain(Deadline::afterMs(10'000), [](const ibv_wc&) {}).ok());
  }
  if (writer) return;
  std::sort(flushUs.begin(), flushUs.end());
  printf("@@verbs quiesce rounds=%d: something landed after ERR alone in %d of %d rounds, after the flush in %d of "
         "%zu; receive queue flush median %llu us, max %llu us\n",
         rounds, lateAfterErr, errRounds, lateAfterFlush, flushUs.size(),
         flushUs.empty() ? 0ull : static_cast<unsigned long long>(flushUs[flushUs.size() / 2]),
         flushUs.empty() ? 0ull : static_cast<unsigned long long>(flushUs.back()));
}

}  // namespace
}  // namespace reccl::lab
