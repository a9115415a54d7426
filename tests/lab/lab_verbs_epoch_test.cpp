// Steps an RDMA receive path still had queued when its port's epoch changed (completions waiting
// to be polled as a migration commits): dropped as stale in any order, never read as a gap in the
// steps. A receiver's commit shuts its old path down before it sets the new epoch; this checks the
// path's own rule, without the commit. Same binary and boot as lab_verbs_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "channel/step_header.h"
#include "reccl/common/deadline.h"
#include "verbs_lab_util.h"

namespace reccl::lab {
namespace {

TEST_F(VerbsLab, StepsQueuedWhenTheEpochChangesAreDroppedAsStaleNotAGap) {
  constexpr uint64_t kSteps = 3;
  const size_t chunk = 16 * 1024;
  channel::PortEnv env;
  std::vector<DuplexSpec> specs = {{0, {}}};
  auto ds = makeDuplexes(specs, rails_, *peer_, *engine_, &env, {}, kSlots, chunk);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EngineDetach detach{engine_.get(), &*ds};
  Duplex& d = *(*ds)[0];
  engine_->remove(d.recvPath);  // the peer's steps complete into its CQ; nothing polls it
  ASSERT_TRUE(peer_->barrier(0xe90c0).ok());
  uint64_t frames = 0;
  for (uint64_t s = 1; s <= kSteps; ++s) {
    auto slot = d.send->acquire(Deadline::afterMs(10'000));
    ASSERT_TRUE(slot.ok()) << slot.status().ToString();
    const size_t n = stepBytes(s, chunk);
    fillStep(slot->first(n), peer_->rank(), d.stream, s);
    ASSERT_TRUE(d.send->post(n, stepDesc(s, n)).ok());
    frames += n + channel::kStepHeaderBytes;
  }
  // Every write of this end completed (so it landed at the peer), then both ends go on.
  for (Deadline dl = Deadline::afterMs(10'000); d.sendPath->bytesMoved() < frames && !dl.expired();)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(d.sendPath->bytesMoved(), frames);
  ASSERT_TRUE(peer_->barrier(0xe90c1).ok());
  d.recv->setEpoch(d.recv->epoch() + 1);
  ASSERT_TRUE(engine_->add(d.recvPath).ok());
  for (Deadline dl = Deadline::afterMs(10'000); env.staleSteps.load() < kSteps && !d.recv->failed() && !dl.expired();)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(d.recv->failed()) << d.recv->error().ToString();
  EXPECT_EQ(env.staleSteps.load(), kSteps);
  EXPECT_EQ(d.recv->received(), 0u);
  closeAll(*ds);
}

}  // namespace
}  // namespace reccl::lab
