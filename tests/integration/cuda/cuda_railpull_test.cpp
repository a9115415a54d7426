// A rail pulled during a device allreduce (labels device and integration): the testbed's 2 hosts
// x 2 rails, one rank per host, both ranks' processes on the one GPU of the machine, allreduces
// on device buffers and a CUDA stream (cuda_stream_worker, WORKER_MODE=loop) while host 0's
// switch port on rail 0 goes down. Every result is checked bit for bit against the closed form
// by the worker; the connections must have failed over. Device data move through the pinned
// staging slots and then the same channels as host data, so the failover is the host path's.
#include <chrono>

#include "failover_job.h"
#include "transport/cuda/device_probe.h"

namespace {

using reccl::test::failover::Job;
using reccl::test::failover::sumField;

class DeviceRailPull : public reccl::test::failover::FailoverTest<2> {
 protected:
  using Base = reccl::test::failover::FailoverTest<2>;
  static void SetUpTestSuite() {
    if (reccl::cuda::deviceCount() == 0) return;  // no testbed for a test that skips
    Base::SetUpTestSuite();
  }
  void SetUp() override {
    if (reccl::cuda::deviceCount() == 0) GTEST_SKIP() << reccl::cuda::noDeviceReason();
    Base::SetUp();
  }
};

TEST_F(DeviceRailPull, SwitchSideLinkDownMidDeviceAllreduceStaysBitExact) {
  Job j(testbed().name(), env("WORKER_MODE=loop WORKER_ITERS=150 WORKER_COUNT=4194304"), 240);
  ASSERT_TRUE(j.waitFor("iteration 20", 1, std::chrono::seconds(90))) << j.text();
  link(false, 0, 0, true);
  expectAllOk(j, 2);
  std::string t = j.text();
  EXPECT_GE(sumField(t, "failovers"), 2u) << t;  // both directions of the pair on rail 0
  EXPECT_EQ(sumField(t, "wrong"), 0u) << t;
}

}  // namespace
