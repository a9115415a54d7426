// A testbed per test suite, for integration tests.
//
//   class RailTest : public reccl::test::TestbedTest<2, 2> {};   // 2 hosts x 2 rails, veth
//   TEST_F(RailTest, Ping) {
//     auto r = run(0, {"ping", "-c1", "-W2", railAddr(1, 0)});
//     EXPECT_EQ(r.exitCode, 0) << r.err;
//   }
//
// The testbed gets a unique name (pid + counter) so suites run in parallel. It is removed in
// TearDownTestSuite and, should the test process die (crash, ctest timeout, SIGKILL), by a small
// guard process that waits for the test process's end on a pipe and then runs `down`.
// Without root every test of the suite is skipped with the reason.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/testbed/child_process.h"
#include "reccl/testbed/testbed.h"
#include "reccl/testbed/testbed_layout.h"

namespace reccl::test {

using testbed::CapturedRun;
using testbed::NicKind;
using testbed::TestbedSpec;
using testbed::TestbedState;

// "" when this process may build testbeds, else why not (for GTEST_SKIP).
std::string testbedSkipReason();

// "t<pid base36>-<n>": unique among live processes and within this one; fits the 12-char limit.
std::string uniqueTestbedName();

// Owns one testbed for its lifetime, with the crash-safe guard described above.
class ScopedTestbed {
 public:
  // spec.name empty: a unique name is chosen. A stale testbed of the same name (an earlier
  // process with this pid that died unguarded) is removed first.
  static Result<std::unique_ptr<ScopedTestbed>> create(TestbedSpec spec);
  ~ScopedTestbed();
  ScopedTestbed(const ScopedTestbed&) = delete;
  ScopedTestbed& operator=(const ScopedTestbed&) = delete;

  const TestbedState& state() const { return state_; }
  const std::string& name() const { return state_.spec.name; }
  const std::string& netns(int host) const;

  // Runs argv in the host, capturing output; killed at the timeout.
  CapturedRun run(int host, const std::vector<std::string>& argv,
                  std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  // `sh -c script` in the host.
  CapturedRun shell(int host, const std::string& script,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  // One ping (DF set, payload bytes) from host `from` to `to` on rail (-1: mgmt); true on reply.
  bool ping(int from, int to, int rail, int payload = 56, int waitSec = 2) const;

 private:
  ScopedTestbed() = default;
  TestbedState state_;
  int guardWriteFd_ = -1;  // closing it tells the guard to clean up and exit
  int guardPid_ = -1;
};

// Starts a guard process that runs `atEnd` when writeFd's owner (this process) closes it or
// dies. Returns the write end (keep it open while what it guards lives) or -1. Call it before
// this process starts threads: the guard is a fork of it.
int startExitGuard(const std::function<void()>& atEnd, int* guardPid);
// The guard of a testbed: runs `down(name)`.
int startTeardownGuard(const std::string& name, int* guardPid);

template <int Hosts, int Rails, NicKind Nic = NicKind::kVeth, int Mtu = testbed::kDefaultMtu>
class TestbedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skipReason_ = testbedSkipReason();
    if (!skipReason_.empty()) return;
    TestbedSpec spec;
    spec.hosts = Hosts;
    spec.rails = Rails;
    spec.nic = Nic;
    spec.mtu = Mtu;
    auto tb = ScopedTestbed::create(spec);
    if (tb.ok()) tb_ = std::move(*tb);
    else upError_ = tb.status().ToString();
  }
  static void TearDownTestSuite() { tb_.reset(); }

  void SetUp() override {
    if (!skipReason_.empty()) GTEST_SKIP() << skipReason_;
    ASSERT_NE(tb_, nullptr) << "testbed up failed: " << upError_;
  }

  static ScopedTestbed& testbed() { return *tb_; }
  static const std::string& netns(int host) { return tb_->netns(host); }
  static std::string fabricNetns() { return tb_->state().fabricNetns; }
  static std::string railAddr(int host, int rail) { return testbed::railAddress(host, rail); }
  static std::string mgmtAddr(int host) { return testbed::mgmtAddress(host); }
  static CapturedRun run(int host, const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    return tb_->run(host, argv, timeout);
  }
  static CapturedRun shell(int host, const std::string& script,
                           std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    return tb_->shell(host, script, timeout);
  }
  static bool ping(int from, int to, int rail, int payload = 56, int waitSec = 2) {
    return tb_->ping(from, to, rail, payload, waitSec);
  }

  inline static std::unique_ptr<ScopedTestbed> tb_;
  inline static std::string skipReason_;
  inline static std::string upError_;
};

}  // namespace reccl::test
