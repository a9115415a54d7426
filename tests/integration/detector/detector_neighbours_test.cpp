// A link that comes back asks at once for the neighbours (ARP entries) its outage left
// unresolved (neighbours.h): a packet sent over the device while its link was down leaves its
// destination's entry INCOMPLETE, and otherwise the kernel asks again only after retrans_time_ms
// (1 s), so for most of a second after the link's return nothing reaches that neighbour (a
// failover's connection onto the returned rail included). Real namespaces, a real veth pair,
// the real detector (BPF hooks and the rtnetlink fallback).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "reccl/common/deadline.h"
#include "reccl/detector/detector.h"
#include "reccl/detector/neighbours.h"
#include "veth_lab.h"

namespace reccl::detector {
namespace {

using testing::runCmd;
using testing::VethLab;

// The neighbour entry of `addr` on eth0 in the host namespace, as `ip neigh` prints it ("" none).
std::string neighbourLine(const VethLab& lab, const std::string& addr) {
  std::string cmd = "ip -n " + lab.hostNs() + " neigh show dev eth0 to " + addr + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  char buf[256];
  std::string out;
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  return out;
}

bool unresolved(const std::string& line) {
  return line.find("INCOMPLETE") != std::string::npos || line.find("FAILED") != std::string::npos;
}

TEST(NeighbourState, OnlyIncompleteAndFailedAreAskedForAgain) {
  EXPECT_TRUE(unresolvedNeighbourState(0x01));   // NUD_INCOMPLETE
  EXPECT_TRUE(unresolvedNeighbourState(0x20));   // NUD_FAILED
  EXPECT_FALSE(unresolvedNeighbourState(0x02));  // NUD_REACHABLE
  EXPECT_FALSE(unresolvedNeighbourState(0x04));  // NUD_STALE
  EXPECT_FALSE(unresolvedNeighbourState(0x10));  // NUD_PROBE: resolved, being re-confirmed
  EXPECT_FALSE(unresolvedNeighbourState(0x80));  // NUD_PERMANENT
}

class DetectorNeighbours : public ::testing::TestWithParam<SourceMode> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: network namespaces and BPF";
  }
};

TEST_P(DetectorNeighbours, ALinkBackResolvesTheNeighboursItsOutageLeftUnresolved) {
  VethLab lab(GetParam() == SourceMode::kNetlink ? "nbn" : "nbb", 1);
  ASSERT_TRUE(lab.ok());
  ASSERT_TRUE(runCmd("ip -n " + lab.hostNs() + " addr add 10.213.0.1/24 dev eth0"));
  ASSERT_TRUE(runCmd("ip -n " + lab.switchNs() + " addr add 10.213.0.2/24 dev sw0"));
  DetectorOptions opts;
  opts.mode = GetParam();
  opts.rdma = false;
  opts.stateMachine.holdDownNs = 200'000'000;
  opts.watch = {{lab.hostNs(), "eth0"}};
  auto det = Detector::create(opts);
  ASSERT_TRUE(det.ok()) << det.status().ToString();
  Detector& d = *det.value();
  ASSERT_TRUE(d.start().ok());
  lab.settle();

  // The switch port goes down; a packet sent meanwhile leaves the neighbour unresolved.
  ASSERT_TRUE(lab.switchPort(0, false));
  bool down = false;
  for (Deadline dl = Deadline::afterMs(10000); !down && !dl.expired();)
    for (auto& e : d.waitEvents(dl.remainingMsForPoll())) down |= e.type == LinkEventType::kLinkDown;
  ASSERT_TRUE(down) << "no link-down event";
  // The kernel's own handling of the carrier loss first (it flushes the device's neighbours):
  // a BPF hook reports the loss before that runs.
  bool lowerDown = false;
  for (Deadline dl = Deadline::afterMs(3000); !lowerDown && !dl.expired();) {
    FILE* p = popen(("ip -n " + lab.hostNs() + " link show eth0").c_str(), "r");
    char buf[512];
    while (p && fgets(buf, sizeof buf, p)) lowerDown |= std::string(buf).find("NO-CARRIER") != std::string::npos;
    if (p) pclose(p);
    if (!lowerDown) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(lowerDown) << "eth0 never showed NO-CARRIER";
  runCmd("ip netns exec " + lab.hostNs() + " ping -c1 -W0.1 10.213.0.2");
  ASSERT_TRUE(unresolved(neighbourLine(lab, "10.213.0.2"))) << neighbourLine(lab, "10.213.0.2");
  const uint64_t probedBefore = d.status().counters.neighboursProbed;

  // Back up well before the kernel's next ARP try (1 s after the packet): the entry must go at the
  // link's physical return, not be left to that try.
  ASSERT_TRUE(lab.switchPort(0, true));
  auto t0 = std::chrono::steady_clock::now();
  std::string line = neighbourLine(lab, "10.213.0.2");
  while (unresolved(line) && std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2000)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    line = neighbourLine(lab, "10.213.0.2");
  }
  auto tookMs = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(tookMs, 500) << "still unresolved " << tookMs << " ms after the link came back: " << line;
  EXPECT_GE(d.status().counters.neighboursProbed, probedBefore + 1);
  // Resolved, not removed: the neighbour answers at once.
  EXPECT_NE(line.find("lladdr"), std::string::npos) << line;
  EXPECT_TRUE(runCmd("ip netns exec " + lab.hostNs() + " ping -c1 -W0.3 10.213.0.2"));
}

INSTANTIATE_TEST_SUITE_P(Sources, DetectorNeighbours, ::testing::Values(SourceMode::kAuto, SourceMode::kNetlink),
                         [](const ::testing::TestParamInfo<SourceMode>& i) {
                           return std::string(i.param == SourceMode::kNetlink ? "Rtnetlink" : "Bpf");
                         });

}  // namespace
}  // namespace reccl::detector
