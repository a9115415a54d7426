// Parsing of watch specs, source modes and RECCL_* detector variables.
#include <gtest/gtest.h>

#include <cstdlib>

#include "reccl/detector/detector_options.h"

namespace reccl::detector {
namespace {

TEST(DetectorOptions, WatchSpecs) {
  auto a = parseWatchSpec("eth0");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->netns, "");
  EXPECT_EQ(a->ifname, "eth0");
  auto b = parseWatchSpec("tb1-h0:rail1");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->netns, "tb1-h0");
  EXPECT_EQ(b->ifname, "rail1");
  auto c = parseWatchSpec("/proc/1/ns/net:eth0");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->netns, "/proc/1/ns/net");
  for (const char* bad : {"", ":eth0", "ns:", "averyveryverylongname0", "ns:a b"}) {
    auto r = parseWatchSpec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Errc::kInvalidArgument);
  }
  EXPECT_NE(parseWatchSpec("ns:").status().message().find("dev"), std::string::npos)
      << "message names the argument";
}

TEST(DetectorOptions, SourceModes) {
  EXPECT_EQ(parseSourceMode("auto").value(), SourceMode::kAuto);
  EXPECT_EQ(parseSourceMode("bpf").value(), SourceMode::kBpf);
  EXPECT_EQ(parseSourceMode("netlink").value(), SourceMode::kNetlink);
  auto bad = parseSourceMode("kprobe");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("source"), std::string::npos);
}

TEST(DetectorOptions, FromEnvironment) {
  setenv("RECCL_DETECTOR", "netlink", 1);
  setenv("RECCL_HOLDDOWN_MS", "250", 1);
  setenv("RECCL_DAMPING_HALFLIFE_MS", "2000", 1);
  setenv("RECCL_RETRANS_THRESHOLD", "7", 1);
  setenv("RECCL_RETRANS_RATE", "5", 1);
  auto o = DetectorOptions::fromEnv();
  EXPECT_EQ(o.mode, SourceMode::kNetlink);
  EXPECT_EQ(o.stateMachine.holdDownNs, 250'000'000u);
  EXPECT_EQ(o.stateMachine.damping.halfLifeNs, 2'000'000'000u);
  EXPECT_EQ(o.bpf.retransThreshold, 7u);
  EXPECT_EQ(o.bpf.retransRatePpm, 5000u) << "per mille in the environment, per million in the program";
  EXPECT_TRUE(o.validate().ok());
  setenv("RECCL_RETRANS_RATE", "0", 1);
  EXPECT_EQ(DetectorOptions::fromEnv().bpf.retransRatePpm, 0u) << "0 turns the rate check off";
  unsetenv("RECCL_DETECTOR");
  unsetenv("RECCL_HOLDDOWN_MS");
  unsetenv("RECCL_DAMPING_HALFLIFE_MS");
  unsetenv("RECCL_RETRANS_THRESHOLD");
  unsetenv("RECCL_RETRANS_RATE");
  EXPECT_EQ(DetectorOptions::fromEnv().bpf.retransRatePpm, BpfOptions{}.retransRatePpm)
      << "the table's default and the options' default agree";
}

TEST(DetectorOptions, RetransRateOutOfRangeNamed) {
  for (const char* bad : {"-1", "1001"}) {
    setenv("RECCL_RETRANS_RATE", bad, 1);
    auto st = DetectorOptions::fromEnv().validate();
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.code(), Errc::kInvalidArgument);
    EXPECT_NE(st.message().find("retrans-rate"), std::string::npos) << st.message();
  }
  setenv("RECCL_RETRANS_RATE", "1000", 1);
  EXPECT_TRUE(DetectorOptions::fromEnv().validate().ok());
  unsetenv("RECCL_RETRANS_RATE");
}

TEST(DetectorOptions, RetransPoolFromEnvAndOutOfRangeNamed) {
  EXPECT_EQ(DetectorOptions::fromEnv().bpf.retransPoolWindows, BpfOptions{}.retransPoolWindows)
      << "the table's default and the options' default agree";
  EXPECT_EQ(BpfOptions{}.retransPoolWindows, static_cast<uint32_t>(RECCL_RETRANS_POOL_MAX));
  setenv("RECCL_RETRANS_POOL", "0", 1);
  EXPECT_EQ(DetectorOptions::fromEnv().bpf.retransPoolWindows, 0u) << "0 judges each window alone";
  EXPECT_TRUE(DetectorOptions::fromEnv().validate().ok());
  for (const char* bad : {"-1", "9"}) {
    setenv("RECCL_RETRANS_POOL", bad, 1);
    auto st = DetectorOptions::fromEnv().validate();
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.code(), Errc::kInvalidArgument);
    EXPECT_NE(st.message().find("retrans-pool"), std::string::npos) << st.message();
  }
  unsetenv("RECCL_RETRANS_POOL");
}

TEST(DetectorOptions, ScanPeriodFromEnvAndOutOfRangeNamed) {
  EXPECT_EQ(DetectorOptions::fromEnv().bpf.scanPeriodNs, 100'000u) << "default 100 us";
  setenv("RECCL_DETECTOR_SCAN_US", "0", 1);
  EXPECT_EQ(DetectorOptions::fromEnv().bpf.scanPeriodNs, 0u) << "0: no scan";
  setenv("RECCL_DETECTOR_SCAN_US", "1000", 1);
  EXPECT_EQ(DetectorOptions::fromEnv().bpf.scanPeriodNs, 1'000'000u);
  for (const char* bad : {"-1", "1000001"}) {
    setenv("RECCL_DETECTOR_SCAN_US", bad, 1);
    auto st = DetectorOptions::fromEnv().validate();
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("RECCL_DETECTOR_SCAN_US"), std::string::npos) << st.message();
  }
  unsetenv("RECCL_DETECTOR_SCAN_US");
}

TEST(DetectorOptions, ValidationNamesTheBadParameter) {
  DetectorOptions o;
  o.stateMachine.damping.reuseThreshold = 5000;
  o.stateMachine.damping.suppressThreshold = 3000;
  auto st = o.validate();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("damping-reuse"), std::string::npos);
}

}  // namespace
}  // namespace reccl::detector
