// The verbs transport between two lab hosts (tools/lab/lab.sh --vms 2 --rails 2): device
// mapping, bit-exact streams on both rails per ack mode, the cost of registering user buffers.
// The cable pull is in lab_verbs_pull_test.cpp (same binary, same boot). TCG-emulated RDMA: the
// figures printed are correctness and relative times, not bandwidth.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include "channel/step_header.h"
#include "reccl/common/deadline.h"
#include "transport/verbs/transport_choice.h"
#include "verbs_lab_util.h"

namespace reccl::lab {
namespace {

TEST_F(VerbsLab, RailNicsMapToTheirRxePortsAndAutoPicksVerbs) {
  std::vector<RailNic> nics;
  for (auto& r : rails_) {
    EXPECT_EQ(r->port().device, "rxe_" + r->netdev());
    EXPECT_EQ(r->port().gidType, GidType::kRoceV2);
    auto nic = railNicByName(r->netdev());
    ASSERT_TRUE(nic.ok());
    EXPECT_EQ(r->port().gid, ipv4MappedGid(nic->ipv4));
    nics.push_back(*nic);
  }
  auto inv = readRdmaInventory();
  ASSERT_TRUE(inv.ok());
  RankRdma mine = railReadiness(peer_->rank(), *inv, nics);
  EXPECT_TRUE(mine.ready) << mine.reason;
  // The management NIC has no RDMA device: a rank whose rails were that would get sockets.
  auto eth0 = railNicByName("eth0");
  ASSERT_TRUE(eth0.ok());
  std::vector<RailNic> mgmt = {*eth0};
  RankRdma noRdma = railReadiness(peer_->rank(), *inv, mgmt);
  EXPECT_FALSE(noRdma.ready);
  auto theirs = peer_->exchangeU64(mine.ready);
  ASSERT_TRUE(theirs.ok());
  std::vector<RankRdma> all = {mine, {1 - peer_->rank(), *theirs != 0, "peer"}};
  EXPECT_TRUE(decideTransport(TransportMode::kAuto, all)->verbs);
  std::vector<RankRdma> mixed = {mine, noRdma};
  EXPECT_FALSE(decideTransport(TransportMode::kAuto, mixed)->verbs);
  EXPECT_FALSE(decideTransport(TransportMode::kVerbs, mixed).ok());
}

// Many steps (odd sizes, 1 B to a whole 16 KiB slot) in both directions on both rails at once,
// every byte checked; once per ack mode, with the progress thread's CPU time for the A/B.
class VerbsLabAcks : public VerbsLab, public ::testing::WithParamInterface<AckMode> {};

TEST_P(VerbsLabAcks, StepsMoveBitExactOverBothRails) {
  const uint64_t steps = static_cast<uint64_t>(envInt("RECCL_LAB_VERBS_STEPS", 400));
  const size_t chunk = 16 * 1024;
  channel::PortEnv env;
  std::vector<DuplexSpec> specs = {{0, {}}, {1, {}}};
  VerbsPathOptions opts{GetParam()};
  auto ds = makeDuplexes(specs, rails_, *peer_, *engine_, &env, opts, kSlots, chunk);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EngineDetach detach{engine_.get(), &*ds};
  const uint64_t cpu0 = engine_->cpuNs(), sleeps0 = engine_->sleeps();
  const uint64_t t0 = monotonicNs();
  {
    Streams run(*ds, peer_->rank(), steps, 60'000);
    run.join();
  }
  const double secs = (monotonicNs() - t0) / 1e9;
  uint64_t bytes = 0;
  for (uint64_t s = 1; s <= steps; ++s) bytes += stepBytes(s, chunk);
  // What the rail meter reads (PathSample::bytes): every frame, header and payload, once each way.
  // The last writes' completions may still be on their way when the peer has verified the steps.
  const uint64_t frameBytes = bytes + steps * channel::kStepHeaderBytes;
  auto settled = [&](const VerbsPath* p) {
    for (Deadline dl = Deadline::afterMs(5000); p->bytesMoved() < frameBytes && !dl.expired();)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return p->bytesMoved();
  };
  for (auto& d : *ds) {
    EXPECT_TRUE(d->sendResult.ok()) << d->sendResult.ToString();
    EXPECT_TRUE(d->recvResult.ok()) << d->recvResult.ToString();
    EXPECT_EQ(d->verified.load(), steps) << "stream " << d->stream;
    EXPECT_FALSE(d->sendPath->failure()) << d->sendPath->describe();
    EXPECT_EQ(settled(d->sendPath), frameBytes) << d->sendPath->describe();
    EXPECT_EQ(settled(d->recvPath), frameBytes) << d->recvPath->describe();
  }
  EXPECT_EQ(env.duplicateSteps.load(), 0u);
  const double cpuMs = (engine_->cpuNs() - cpu0) / 1e6;
  printf("@@verbs stream ack=%s rank=%d steps=%llu x 4 connections, %.2f s, %.0f steps/s per connection, "
         "%.2f MB/s per direction per rail, progress thread %.1f ms CPU (%.1f us/step), %llu sleeps\n",
         ackModeName(GetParam()), peer_->rank(), static_cast<unsigned long long>(steps), secs, steps / secs,
         bytes / secs / 1e6, cpuMs, cpuMs * 1000 / (4.0 * steps),
         static_cast<unsigned long long>(engine_->sleeps() - sleeps0));
  RecordProperty("steps_per_s", std::to_string(steps / secs));
  RecordProperty("progress_cpu_ms", std::to_string(cpuMs));
  closeAll(*ds);
}

INSTANTIATE_TEST_SUITE_P(Modes, VerbsLabAcks, ::testing::Values(AckMode::kImm, AckMode::kWrite),
                         [](const auto& p) { return std::string(ackModeName(p.param)); });

// Staging through the slots (what the transport does) against registering the user's buffer on
// every rail's PD (what a registration cache would do on first use of a buffer): the cost of
// each for one buffer, measured here side by side.
TEST_F(VerbsLab, UserBufferRegistrationAgainstStagingCopy) {
  for (size_t bytes : {size_t{64} << 10, size_t{1} << 20, size_t{16} << 20}) {
    void* user = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void* slots = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(user, MAP_FAILED);
    ASSERT_NE(slots, MAP_FAILED);
    std::memset(user, 1, bytes);
    std::memset(slots, 2, bytes);
    const int reps = bytes >= (size_t{16} << 20) ? 3 : 10;
    uint64_t regNs = 0, deregNs = 0, copyNs = 0;
    for (int i = 0; i < reps; ++i) {
      for (auto& r : rails_) {
        uint64_t a = monotonicNs();
        ibv_mr* mr = ibv_reg_mr(r->pd(), user, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        uint64_t b = monotonicNs();
        ASSERT_NE(mr, nullptr) << "registering " << bytes << " bytes on " << r->port().device << ": " << strerror(errno);
        EXPECT_EQ(ibv_dereg_mr(mr), 0);
        regNs += b - a;
        deregNs += monotonicNs() - b;
      }
      uint64_t c = monotonicNs();
      std::memcpy(slots, user, bytes);
      copyNs += monotonicNs() - c;
    }
    ASSERT_EQ(std::memcmp(slots, user, bytes), 0);
    printf("@@verbs registration rank=%d bytes=%zu rails=%zu: register %.1f us + deregister %.1f us on every rail, "
           "staging copy %.1f us (ratio %.1f)\n",
           peer_->rank(), bytes, rails_.size(), regNs / 1e3 / reps, deregNs / 1e3 / reps, copyNs / 1e3 / reps,
           double(regNs + deregNs) / std::max<uint64_t>(copyNs, 1));
    munmap(user, bytes);
    munmap(slots, bytes);
  }
}

}  // namespace
}  // namespace reccl::lab
