// Gray failures of RDMA ports (rdma_loss.h): the judgement on its own, table-tested; the sysfs
// reading on a tree laid out as rxe's and mlx5's; and a Detector that reads such a tree for its
// watched loopback device and declares it DEGRADED. The counters of a real rxe port under real
// losses: the gray-rail run by hand in docs/lab.md.
#include <gtest/gtest.h>
#include <net/if.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "reccl/common/deadline.h"
#include "reccl/detector/detector.h"
#include "reccl/detector/detector_options.h"
#include "reccl/detector/rdma_loss.h"

namespace reccl::detector {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMs = 1'000'000;

TEST(RdmaLossJudge, CountAndShareWithinTheWindow) {
  RdmaLossParams p;  // 3 errors, 100 ppm
  p.windowNs = 250 * kMs;
  p.poolWindows = 0;  // the window alone (the pool: below)
  struct Step {
    uint64_t ms, errors, packets;
    bool declared;
  };
  struct Case {
    const char* name;
    std::vector<Step> steps;
  };
  const std::vector<Case> cases = {
      {"quiet", {{0, 0, 0, false}, {50, 0, 5000, false}, {100, 0, 10000, false}}},
      {"three errors in the window", {{0, 10, 0, false}, {50, 11, 1000, false}, {100, 13, 2000, true}}},
      {"two are not enough", {{0, 0, 0, false}, {50, 2, 1000, false}, {100, 2, 2000, false}}},
      // 3 errors in 60,000 packets: 50 per million, under the share.
      {"a busy link's rare losses", {{0, 0, 0, false}, {50, 3, 60000, false}, {100, 3, 120000, false}}},
      // The errors spread over more than the window: never three within one.
      {"slow trickle", {{0, 0, 0, false}, {200, 1, 100, false}, {400, 2, 200, false}, {600, 3, 300, false},
                        {800, 4, 400, false}}},
      // No packets at all in the window (the peer's answers lost too): every error counts fully.
      {"nothing else moved", {{0, 0, 0, false}, {50, 3, 0, true}}},
      // The evidence is used once: the next verdict needs three new errors (and a second).
      {"evidence used once",
       {{0, 0, 0, false}, {50, 3, 100, true}, {1060, 4, 200, false}, {1110, 6, 300, false}, {1160, 7, 400, true}}},
      // A device reset: the totals went back, the window starts over.
      {"counters reset", {{0, 100, 1000, false}, {50, 1, 10, false}, {100, 3, 20, false}, {150, 4, 30, true}}},
  };
  for (const auto& c : cases) {
    RdmaLossJudge j(p);
    for (const auto& s : c.steps) {
      auto v = j.feed(s.ms * kMs, s.errors, s.packets);
      EXPECT_EQ(v.has_value(), s.declared) << c.name << " at " << s.ms << " ms";
    }
  }
}

TEST(RdmaLossJudge, PooledWindowsForThinFlows) {
  struct Step {
    uint64_t ms, errors, packets;
    bool declared;
  };
  struct Case {
    const char* name;
    uint32_t pool;
    std::vector<Step> steps;
  };
  const std::vector<Case> cases = {
      // About one error per QP timeout: never three in a second, three within four.
      {"a thin lossy flow", 4, {{0, 0, 0, false}, {1000, 1, 50, false}, {2000, 2, 100, false}, {2100, 3, 105, true}}},
      {"the pool off", 0, {{0, 0, 0, false}, {1000, 1, 50, false}, {2000, 2, 100, false}, {2100, 3, 105, false}}},
      {"a pool of one window is the window", 1,
       {{0, 0, 0, false}, {1000, 1, 50, false}, {2000, 2, 100, false}, {2100, 3, 105, false}}},
      // Two errors a window at 50,000 packets: 40 per million pooled, under the share.
      {"a busy link under the share", 4,
       {{0, 0, 0, false}, {1000, 2, 50000, false}, {2000, 4, 100000, false}, {3000, 6, 150000, false}}},
      // One error every 1.5 s: never three within the pool's four seconds.
      {"spread past the pool", 4,
       {{0, 0, 0, false}, {1500, 1, 10, false}, {3000, 2, 20, false}, {4500, 3, 30, false}, {6000, 4, 40, false}}},
      // Three in the window under the share: the window was judged, not pooled.
      {"at the count the window alone", 4, {{0, 0, 0, false}, {500, 3, 100000, false}, {1500, 3, 100010, false}}},
      // Three in the window at 75 per million: not the pool's, though with the window before
      // (five at 124 per million) it would pass the share.
      {"only under the count", 4, {{0, 0, 0, false}, {500, 2, 10, false}, {700, 2, 20, false}, {1600, 5, 40020, false}}},
      // A pooled verdict uses its evidence up too: the next needs three errors after it.
      {"pooled evidence used once", 4,
       {{0, 0, 0, false}, {1000, 1, 50, false}, {2000, 2, 100, false}, {2100, 3, 105, true}, {3200, 4, 150, false},
        {4200, 5, 200, false}, {5300, 6, 250, true}}},
  };
  for (const auto& c : cases) {
    RdmaLossParams p;  // 1 s, 3 errors, 100 ppm
    p.poolWindows = c.pool;
    RdmaLossJudge j(p);
    for (const auto& s : c.steps) {
      auto v = j.feed(s.ms * kMs, s.errors, s.packets);
      EXPECT_EQ(v.has_value(), s.declared) << c.name << " at " << s.ms << " ms";
      if (v) {
        EXPECT_TRUE(v->pooled) << c.name;
      }
    }
  }
  // The verdict's figures are the pool's.
  RdmaLossJudge j(RdmaLossParams{});
  ASSERT_FALSE(j.feed(0, 0, 0));
  ASSERT_FALSE(j.feed(1000 * kMs, 2, 400));
  auto v = j.feed(1500 * kMs, 3, 500);
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->pooled);
  EXPECT_EQ(v->errors, 3u);
  EXPECT_EQ(v->ppm, 6000u);
  // Not without the share, nor on a port that counts no packets: the count alone over seconds
  // would add up a busy link's rare losses.
  RdmaLossParams countOnly;
  countOnly.ratePpm = 0;
  for (auto [params, packets] : {std::pair{countOnly, std::optional<uint64_t>(0)},
                                 std::pair{RdmaLossParams{}, std::optional<uint64_t>()}}) {
    RdmaLossJudge k(params);
    ASSERT_FALSE(k.feed(0, 0, packets));
    ASSERT_FALSE(k.feed(1000 * kMs, 2, packets));
    EXPECT_FALSE(k.feed(1500 * kMs, 3, packets));
  }
}

TEST(RdmaLossJudge, VerdictCarriesCountAndShare) {
  RdmaLossJudge j(RdmaLossParams{});  // 1 s
  ASSERT_FALSE(j.feed(0, 0, 0));
  auto v = j.feed(50 * kMs, 4, 2000);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->errors, 4u);
  EXPECT_EQ(v->ppm, 2000u);
  // A port without packet counters: the count alone, share 0.
  RdmaLossJudge k(RdmaLossParams{});
  ASSERT_FALSE(k.feed(0, 0, std::nullopt));
  auto w = k.feed(50 * kMs, 3, std::nullopt);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->ppm, 0u);
  // The share check off: a busy link's three errors count.
  RdmaLossParams countOnly;
  countOnly.ratePpm = 0;
  RdmaLossJudge c(countOnly);
  ASSERT_FALSE(c.feed(0, 0, 0));
  EXPECT_TRUE(c.feed(50 * kMs, 3, 10'000'000));
}

TEST(RdmaLossJudge, AtMostOneVerdictASecondAndTheHeldEvidenceStays) {
  RdmaLossParams p;
  p.windowNs = 2'000 * kMs;
  RdmaLossJudge j(p);
  ASSERT_FALSE(j.feed(0, 0, 0));
  ASSERT_TRUE(j.feed(100 * kMs, 3, 100));
  EXPECT_FALSE(j.feed(200 * kMs, 6, 200)) << "a second verdict within a second";
  EXPECT_FALSE(j.feed(600 * kMs, 9, 300));
  auto v = j.feed(1'100 * kMs, 9, 400);
  ASSERT_TRUE(v) << "the errors held back count once the second is over";
  EXPECT_EQ(v->errors, 6u);
}

TEST(RdmaLossSampling, ATenthOfTheWindowWithinTenToAHundredMs) {
  RdmaLossParams p;
  EXPECT_EQ(rdmaLossSampleNs(p), 100 * kMs);
  p.windowNs = 500 * kMs;
  EXPECT_EQ(rdmaLossSampleNs(p), 50 * kMs);
  p.windowNs = 20 * kMs;
  EXPECT_EQ(rdmaLossSampleNs(p), 10 * kMs);
  p.windowNs = 10'000 * kMs;
  EXPECT_EQ(rdmaLossSampleNs(p), 100 * kMs);
}

// A sysfs-like tree under a fresh temporary directory, removed with the object.
class FakeSysfs {
 public:
  FakeSysfs() {
    char tmpl[] = "/tmp/reccl-rdma-sysfs-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  ~FakeSysfs() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  const std::string& root() const { return root_; }
  void write(const std::string& rel, const std::string& text) {
    fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  // rxe: the sequence counters and packets in hw_counters.
  void rxe(const std::string& dev, const std::string& netdev, uint64_t oos, uint64_t nak, uint64_t sent,
           uint64_t rcvd) {
    const std::string port = dev + "/ports/1/";
    write(port + "gid_attrs/ndevs/0", netdev);
    write(port + "hw_counters/out_of_seq_request", std::to_string(oos));
    write(port + "hw_counters/rcvd_seq_err", std::to_string(nak));
    write(port + "hw_counters/completer_retry_err", "999");  // a timeout: not counted
    write(port + "hw_counters/sent_pkts", std::to_string(sent));
    write(port + "hw_counters/rcvd_pkts", std::to_string(rcvd));
  }

 private:
  std::string root_;
};

TEST(RdmaSysfs, FindsTheSequenceCountersOfRxeAndMlx5Ports) {
  FakeSysfs t;
  ASSERT_FALSE(t.root().empty());
  t.rxe("rxe_rail0", "rail0", 1, 2, 10, 20);
  // mlx5: its names, packets in the port's PMA counters.
  t.write("mlx5_0/ports/1/gid_attrs/ndevs/0", "eth2");
  t.write("mlx5_0/ports/1/hw_counters/out_of_sequence", "5");
  t.write("mlx5_0/ports/1/hw_counters/packet_seq_err", "6");
  t.write("mlx5_0/ports/1/hw_counters/implied_nak_seq_err", "7");
  t.write("mlx5_0/ports/1/hw_counters/local_ack_timeout_err", "100");
  t.write("mlx5_0/ports/1/counters/port_xmit_packets", "1000");
  t.write("mlx5_0/ports/1/counters/port_rcv_packets", "2000");
  // An InfiniBand port (no netdev) and a driver without sequence counters: not sources.
  t.write("mlx5_1/ports/1/hw_counters/out_of_sequence", "0");
  t.write("other0/ports/1/gid_attrs/ndevs/0", "eth3");
  t.write("other0/ports/1/hw_counters/rx_bytes", "0");

  auto ports = listRdmaLossPorts(t.root());
  ASSERT_EQ(ports.size(), 2u);
  std::sort(ports.begin(), ports.end(), [](const auto& a, const auto& b) { return a.dev < b.dev; });
  EXPECT_EQ(ports[0].dev, "mlx5_0");
  EXPECT_EQ(ports[0].netdev, "eth2");
  EXPECT_EQ(readCounterSum(ports[0].lossFiles), 18u);
  EXPECT_EQ(readCounterSum(ports[0].packetFiles), 3000u);
  EXPECT_EQ(ports[1].dev, "rxe_rail0");
  EXPECT_EQ(ports[1].port, 1u);
  EXPECT_EQ(ports[1].netdev, "rail0");
  EXPECT_EQ(readCounterSum(ports[1].lossFiles), 3u);
  EXPECT_EQ(readCounterSum(ports[1].packetFiles), 30u);
  EXPECT_EQ(rdmaPortNetdev(t.root(), "rxe_rail0", 1), "rail0");
  EXPECT_EQ(rdmaPortNetdev(t.root(), "mlx5_1", 1), "");
  EXPECT_FALSE(readCounterSum({t.root() + "/missing"}));

  auto none = RdmaLossSource::open(t.root() + "/no-rdma-stack", 0, RdmaLossParams{});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Errc::kUnsupported);
}

// The whole detector, in netlink mode: a port bound to "lo" whose counters climb is declared
// DEGRADED through the sampling thread and the state machine, with this source named; its
// counters are not even read while "lo" is not watched (no signal at all); a port that appears
// later is listed and read.
TEST(RdmaLossDetector, AWatchedPortsSequenceErrorsMarkItsNetdevDegraded) {
  FakeSysfs t;
  ASSERT_FALSE(t.root().empty());
  DetectorOptions opts;
  opts.mode = SourceMode::kNetlink;
  opts.rdma = false;
  opts.rdmaSysfs = t.root();
  opts.rdmaLoss.windowNs = 200 * kMs;  // sampled every 20 ms
  opts.rdmaLoss.relistNs = 50 * kMs;
  fs::create_directories(t.root());
  auto det = Detector::create(opts);
  ASSERT_TRUE(det.ok()) << det.status().message();
  Detector& d = **det;
  ASSERT_TRUE(d.activeSources().count(RECCL_LINK_SRC_RDMA_COUNTERS)) << "the RDMA stack is there, ports or not";
  ASSERT_TRUE(d.start().ok());
  auto portsListed = [&] {
    for (const auto& s : d.status().sources)
      if (s.name == "rdma_counters") return s.reason;
    return std::string("(no such source)");
  };
  EXPECT_NE(portsListed().find("yet"), std::string::npos) << portsListed();
  // A device created after the detector started: listed within the relist period.
  t.rxe("rxe_lo", "lo", 0, 0, 0, 0);
  Deadline listed = Deadline::afterMs(3000);
  while (portsListed().find("rxe_lo/1 (lo)") == std::string::npos && !listed.expired()) usleep(10'000);
  EXPECT_NE(portsListed().find("rxe_lo/1 (lo)"), std::string::npos) << portsListed();
  // Not watched: errors climb, nothing is read, nothing judged.
  usleep(100'000);
  t.rxe("rxe_lo", "lo", 5, 5, 400, 400);
  EXPECT_TRUE(d.waitEvents(300).empty());
  EXPECT_EQ(d.status().counters.signals[RECCL_LINK_SRC_RDMA_COUNTERS], 0u) << "an unwatched port was judged";
  // Watched: quiet counters for a while, nothing; then 4 errors in 800 packets (5,000 per million).
  ASSERT_TRUE(d.addWatch(WatchSpec{"", "lo"}).ok());
  EXPECT_TRUE(d.waitEvents(150).empty());
  t.rxe("rxe_lo", "lo", 7, 7, 800, 800);
  auto evs = d.waitEvents(2000);
  auto st = d.status();
  d.stop();
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].type, LinkEventType::kLinkDegraded);
  EXPECT_EQ(evs[0].source, RECCL_LINK_SRC_RDMA_COUNTERS);
  EXPECT_EQ(evs[0].ifname, "lo");
  EXPECT_EQ(evs[0].link.ifindex, if_nametoindex("lo"));
  EXPECT_EQ(st.counters.signals[RECCL_LINK_SRC_RDMA_COUNTERS], 1u);
  ASSERT_EQ(st.links.size(), 1u);
  EXPECT_TRUE(st.links[0].kernelState & RECCL_LINK_STATE_DEGRADED) << "the slot shows the symptom";
}

TEST(RdmaLossDetector, OptionsFromTheEnvironmentAndTheirBounds) {
  setenv("RECCL_RDMA_LOSS_WINDOW_MS", "400", 1);
  setenv("RECCL_RDMA_LOSS_THRESHOLD", "5", 1);
  setenv("RECCL_RDMA_LOSS_PPM", "0", 1);
  setenv("RECCL_RDMA_LOSS_POOL", "8", 1);
  auto o = DetectorOptions::fromEnv();
  EXPECT_EQ(o.rdmaLoss.windowNs, 400 * kMs);
  EXPECT_EQ(o.rdmaLoss.threshold, 5u);
  EXPECT_EQ(o.rdmaLoss.ratePpm, 0u);
  EXPECT_EQ(o.rdmaLoss.poolWindows, 8u);
  EXPECT_EQ(DetectorOptions{}.rdmaLoss.poolWindows, 4u);
  EXPECT_TRUE(o.validate().ok());
  setenv("RECCL_RDMA_LOSS_WINDOW_MS", "0", 1);
  EXPECT_EQ(DetectorOptions::fromEnv().rdmaLoss.windowNs, 0u);
  unsetenv("RECCL_RDMA_LOSS_WINDOW_MS");
  unsetenv("RECCL_RDMA_LOSS_THRESHOLD");
  unsetenv("RECCL_RDMA_LOSS_PPM");
  unsetenv("RECCL_RDMA_LOSS_POOL");
  DetectorOptions bad;
  bad.rdmaLoss.windowNs = 5 * kMs;
  EXPECT_NE(bad.validate().message().find("rdma-loss-window"), std::string::npos);
  bad = DetectorOptions{};
  bad.rdmaLoss.threshold = 0;
  EXPECT_NE(bad.validate().message().find("rdma-loss-threshold"), std::string::npos);
  bad = DetectorOptions{};
  bad.rdmaLoss.ratePpm = 2'000'000;
  EXPECT_NE(bad.validate().message().find("rdma-loss-ppm"), std::string::npos);
  bad = DetectorOptions{};
  bad.rdmaLoss.poolWindows = kRdmaLossPoolMax + 1;
  EXPECT_NE(bad.validate().message().find("rdma-loss-pool"), std::string::npos);
  // Off: no source, said why.
  DetectorOptions off;
  off.mode = SourceMode::kNetlink;
  off.rdmaLoss.windowNs = 0;
  auto d = Detector::create(off);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE((*d)->activeSources().count(RECCL_LINK_SRC_RDMA_COUNTERS));
}

}  // namespace
}  // namespace reccl::detector
