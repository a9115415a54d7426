// A rail pulled during a device allreduce (labels device and integration): the testbed's 2 hosts
// x 2 rails, one rank per host, both ranks' processes on the one GPU of the machine, allreduces
// on device buffers and a CUDA stream (cuda_stream_worker, WORKER_MODE=loop) while host 0's
// rail-0 cable is pulled at the switch (`reccl inject`, netlink: no iproute2 needed on a bare GPU
// image). Every result is checked bit for bit against the closed form by the worker; the
// connections must have failed over. Device data move through the pinned staging slots and then
// the same channels as host data, so the failover is the host path's.
#include <cstdlib>
#include <chrono>
#include <string>

#include "failover_job.h"
#include "testbed_fixture.h"
#include "transport/cuda/device_probe.h"

namespace {

using reccl::test::failover::Job;
using reccl::test::failover::sumField;

class DeviceRailPull : public reccl::test::TestbedTest<2, 2> {
 protected:
  using Base = reccl::test::TestbedTest<2, 2>;
  static void SetUpTestSuite() {
    if (reccl::cuda::deviceCount() == 0) return;  // no testbed for a test that skips
    Base::SetUpTestSuite();
  }
  void SetUp() override {
    if (reccl::cuda::deviceCount() == 0) GTEST_SKIP() << reccl::cuda::noDeviceReason();
    Base::SetUp();
  }
  void TearDown() override {
    if (tb_) (void)cable("link-up", 0, 0);
  }
  // Pulls (link-down) or plugs (link-up) host `host`'s rail `rail` cable at the switch.
  static int cable(const char* verb, int host, int rail) {
    std::string cmd = std::string(RECCL_CLI_PATH) + " inject " + verb + " --netns " + netns(host) + " --dev rail" +
                      std::to_string(rail) + " --side switch";
    return std::system(cmd.c_str());
  }
};

TEST_F(DeviceRailPull, SwitchSideLinkDownMidDeviceAllreduceStaysBitExact) {
  Job j(testbed().name(),
        "RECCL_TIMEOUT_MS=30000 RECCL_STALL_TIMEOUT_MS=1000 RECCL_HOLDDOWN_MS=300 WORKER_MODE=loop WORKER_ITERS=150 "
        "WORKER_COUNT=4194304",
        240);
  ASSERT_TRUE(j.waitFor("iteration 20", 1, std::chrono::seconds(90))) << j.text();
  ASSERT_EQ(cable("link-down", 0, 0), 0);
  int code = j.wait();
  std::string t = j.text();
  EXPECT_EQ(code, 0) << t;
  EXPECT_EQ(reccl::test::failover::countMatches(t, "done rank [0-9]+"), 2) << t;
  EXPECT_GE(sumField(t, "failovers"), 2u) << t;  // both directions of the pair on rail 0
  EXPECT_EQ(sumField(t, "wrong"), 0u) << t;
}

}  // namespace
