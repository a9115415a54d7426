// Gray failures: the tcp_retransmit_skb hook on the testbed. Bulk TCP streams run from host 0 to
// host 1 on both rails; `reccl inject drop --rate 0.01` on rail 0's cable (switch side, so the
// loss is on the wire and invisible to the sender's stack) must produce LinkDegraded from the
// retransmit source for exactly host 0's rail0, and nothing for the clean rail1. Saturated,
// fault-free links retransmit a little (starved senders' probes and timeouts, backlog drops, and
// fast retransmits of reordered segments where the sender moves between CPUs, which the receiver
// then reports as duplicates with D-SACK): they cross a low retransmit count but not the rate of
// lost segments, so no LinkDegraded, while a detector with the rate check off declares them. (An injected drop is no model of this: on a slow, loaded machine
// one dropped GSO packet is already several per mille of a window's segments.)
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <memory>
#include <vector>

#include "reccl/common/deadline.h"
#include "reccl/detector/detector.h"
#include "reccl/detector/netns.h"
#include "testbed_fixture.h"

namespace {

using namespace reccl::detector;

// A connected TCP pair host 0 -> host 1 on a rail (sockets made inside the hosts'
// namespaces; this process stays where it is). error is "" when connected.
struct TcpPair {
  reccl::UniqueFd listen, client, server;
  std::string error;
};

TcpPair connectPair(const Netns& from, const Netns& to, const std::string& fromAddr, const std::string& toAddr) {
  TcpPair p;
  auto ls = socketInNetns(to.fd.get(), AF_INET, SOCK_STREAM, 0);
  auto cs = socketInNetns(from.fd.get(), AF_INET, SOCK_STREAM, 0);
  if (!ls.ok() || !cs.ok()) {
    p.error = "socket in netns";
    return p;
  }
  p.listen = std::move(*ls);
  p.client = std::move(*cs);
  sockaddr_in la{};
  la.sin_family = AF_INET;
  inet_pton(AF_INET, toAddr.c_str(), &la.sin_addr);
  sockaddr_in ca{};
  ca.sin_family = AF_INET;
  inet_pton(AF_INET, fromAddr.c_str(), &ca.sin_addr);
  socklen_t len = sizeof(la);
  if (bind(p.listen.get(), reinterpret_cast<sockaddr*>(&la), sizeof(la)) != 0 || listen(p.listen.get(), 1) != 0 ||
      getsockname(p.listen.get(), reinterpret_cast<sockaddr*>(&la), &len) != 0 ||
      bind(p.client.get(), reinterpret_cast<sockaddr*>(&ca), sizeof(ca)) != 0 ||
      connect(p.client.get(), reinterpret_cast<sockaddr*>(&la), sizeof(la)) != 0) {
    p.error = std::string("bind/listen/connect: ") + strerror(errno);
    return p;
  }
  int fd = accept4(p.listen.get(), nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) {
    p.error = std::string("accept: ") + strerror(errno);
    return p;
  }
  p.server.reset(fd);
  timeval tv{0, 200000};  // so that the pumps see the stop flag
  setsockopt(p.server.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(p.client.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return p;
}

// One TCP stream host 0 -> host 1 on a rail, pumping until stopped. Paced (period > 0): one
// write of `writeBytes` per period, TCP_NODELAY, so each write is one segment -- a thin flow,
// whose losses TCP recovers one by one (tail-loss probes, timeouts). Unpaced: as fast as the
// rail takes it.
class Stream {
 public:
  Stream(const Netns& from, const Netns& to, const std::string& fromAddr, const std::string& toAddr,
         std::chrono::milliseconds period = std::chrono::milliseconds(0), size_t writeBytes = 1 << 18) {
    TcpPair p = connectPair(from, to, fromAddr, toAddr);
    error_ = p.error;
    if (!error_.empty()) return;
    listen_ = std::move(p.listen);
    client_ = std::move(p.client);
    server_ = std::move(p.server);
    if (period.count() > 0) {
      int one = 1;
      setsockopt(client_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    rx_ = std::thread([this] {
      std::vector<char> buf(1 << 18);
      while (!stop_.load()) (void)!recv(server_.get(), buf.data(), buf.size(), 0);
    });
    tx_ = std::thread([this, period, writeBytes] {
      std::vector<char> buf(writeBytes, 'x');
      auto next = std::chrono::steady_clock::now();
      while (!stop_.load()) {
        if (period.count() > 0) {
          // The pace is the workload, not a wait for an event.
          next += period;
          std::this_thread::sleep_until(next);
        }
        ssize_t n = send(client_.get(), buf.data(), buf.size(), MSG_NOSIGNAL);
        if (n > 0) sent_ += static_cast<uint64_t>(n);
      }
    });
  }
  ~Stream() {
    stop_.store(true);
    if (tx_.joinable()) tx_.join();
    if (rx_.joinable()) rx_.join();
  }
  const std::string& error() const { return error_; }
  uint64_t sent() const { return sent_.load(); }

 private:
  reccl::UniqueFd listen_, client_, server_;
  std::thread tx_, rx_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> sent_{0};
  std::string error_;
};

class DetectorRetransmit : public reccl::test::TestbedTest<2, 2> {
 protected:
  void TearDown() override {
    // A failed assertion must not leave the loss on the shared testbed for the next test.
    (void)!system((inject("clear --netns " + netns(0) + " --dev rail0") + " >/dev/null 2>&1").c_str());
  }
  // `reccl inject ARGS`, as a shell command.
  static std::string inject(const std::string& args) { return std::string(RECCL_CLI_PATH) + " inject " + args; }
  // What host 0 sends on rail0 is dropped at the switch port at `rate`: loss on the wire, unseen
  // by the sender's stack.
  int dropOnRail0(const char* rate) {
    return system(inject("drop --netns " + netns(0) + " --dev rail0 --side switch --ingress --rate " + rate).c_str());
  }
  int clearRail0() { return system(inject("clear --netns " + netns(0) + " --dev rail0").c_str()); }
  // A started detector on host 0's rails at the library's defaults (count, rate, window, pool);
  // none when the retransmit hook does not load here (the test is skipped).
  void startDefaultDetector(std::unique_ptr<Detector>* out);
};

// A detector on host 0's rails with the given retransmit rate (per million; 0: count only).
reccl::Result<std::unique_ptr<Detector>> railDetector(const std::string& ns, uint32_t threshold, uint32_t ratePpm) {
  DetectorOptions opts = DetectorOptions::fromEnv();
  opts.mode = SourceMode::kBpf;
  opts.rdma = false;
  opts.bpf.sources = {RECCL_LINK_SRC_TP_TCP_RETRANSMIT};
  opts.bpf.retransThreshold = threshold;
  opts.bpf.retransRatePpm = ratePpm;
  opts.watch = {{ns, "rail0"}, {ns, "rail1"}};
  return Detector::create(opts);
}

int degradedFromRetransmits(const std::vector<LinkEvent>& events, const LinkKey& link) {
  int n = 0;
  for (const auto& e : events)
    if (e.type == LinkEventType::kLinkDegraded && e.link == link && e.source == RECCL_LINK_SRC_TP_TCP_RETRANSMIT) ++n;
  return n;
}

TEST_F(DetectorRetransmit, SaturatedLinkWithRareLossIsNotDegraded) {
  // The library's defaults. With a low count (3) the rate alone decides, and on a machine so
  // loaded that the streams move ~25k segments a window, fault-free windows reach 1-13 per mille
  // (one starved sender's burst): indistinguishable from 1 % loss by any rate.
  const uint32_t kThreshold = BpfOptions{}.retransThreshold;
  auto withRate = railDetector(netns(0), kThreshold, BpfOptions{}.retransRatePpm);
  ASSERT_TRUE(withRate.ok()) << withRate.status().ToString();
  if (!(*withRate)->activeSources().count(RECCL_LINK_SRC_TP_TCP_RETRANSMIT))
    GTEST_SKIP() << "the tcp_retransmit_skb hook does not load on this kernel";
  auto countOnly = railDetector(netns(0), kThreshold, 0);
  ASSERT_TRUE(countOnly.ok()) << countOnly.status().ToString();
  Detector& a = **withRate;
  Detector& b = **countOnly;
  ASSERT_TRUE(a.start().ok());
  ASSERT_TRUE(b.start().ok());
  LinkKey rail0, rail1;
  for (const auto& w : a.watched()) (w.ifname == "rail0" ? rail0 : rail1) = w.key;

  auto h0 = openNetns(netns(0));
  auto h1 = openNetns(netns(1));
  ASSERT_TRUE(h0.ok() && h1.ok());
  std::vector<LinkEvent> eventsA, eventsB;
  RetransWindowStats ra, ra1;  // A's counters at the end of the traffic
  RetransWindowStats raEnd, raEnd1;  // and after B's events were collected
  uint64_t maxLastPpm[2] = {0, 0};  // the highest rate of a closed window per rail
  // Every closed window per rail (events, retransmitted / D-SACKed / sent segments), and the
  // running window at each of detector A's DEGRADED: printed, so that a failure shows its windows.
  std::string windows[2], atDegraded;
  RetransWindowStats prev[2];
  auto windowText = [](uint64_t n, uint64_t re, uint64_t ds, uint64_t sent) {
    return " " + std::to_string(n) + ":" + std::to_string(re) + "/" + std::to_string(ds) + "/" + std::to_string(sent);
  };
  {
    // Two streams per rail: both veth rails saturated, the machine's CPUs busy.
    Stream s0(*h0, *h1, railAddr(0, 0), railAddr(1, 0));
    Stream s1(*h0, *h1, railAddr(0, 1), railAddr(1, 1));
    Stream s2(*h0, *h1, railAddr(0, 0), railAddr(1, 0));
    Stream s3(*h0, *h1, railAddr(0, 1), railAddr(1, 1));
    for (const Stream* s : {&s0, &s1, &s2, &s3}) ASSERT_EQ(s->error(), "");
    reccl::Deadline dl = reccl::Deadline::afterMs(4000);
    while (!dl.expired()) {
      for (auto& e : a.waitEvents(100)) {
        eventsA.push_back(e);
        if (e.type != LinkEventType::kLinkDegraded) continue;
        for (const auto& l : a.status().links)
          if (l.watch.key == e.link)
            atDegraded += " " + l.watch.ifname + windowText(l.retrans.windowRetransmits, l.retrans.windowRetransSegs,
                                                            l.retrans.windowDsackSegs, l.retrans.windowSentSegs);
      }
      for (auto& e : b.drain()) eventsB.push_back(e);
      for (const auto& l : a.status().links) {
        int r = l.watch.key == rail0 ? 0 : 1;
        const RetransWindowStats& w = l.retrans;
        if (w.lastRetransmits != prev[r].lastRetransmits || w.lastRetransSegs != prev[r].lastRetransSegs ||
            w.lastDsackSegs != prev[r].lastDsackSegs || w.lastSentSegs != prev[r].lastSentSegs)
          windows[r] += windowText(w.lastRetransmits, w.lastRetransSegs, w.lastDsackSegs, w.lastSentSegs);
        prev[r] = w;
        if (w.lastRetransmits >= kThreshold && w.lastSentSegs)
          maxLastPpm[r] = std::max(maxLastPpm[r], (w.lastRetransSegs - std::min(w.lastRetransSegs, w.lastDsackSegs)) *
                                                      1'000'000 / w.lastSentSegs);
      }
    }
    // A's counters are read while the streams still run, and B's events are collected after:
    // every retransmit A held by the rate is then one B has seen and judged. Read after the
    // streams close, A would also count their teardown's retransmits, whose DEGRADED B emits
    // after its events were collected.
    for (const auto& l : a.status().links) (l.watch.key == rail0 ? ra : ra1) = l.retrans;
    // B's events pass its ring buffer and thread, on CPUs the streams keep busy: a bounded wait.
    const bool held = ra.heldByRate + ra1.heldByRate > 0;
    for (reccl::Deadline bdl = reccl::Deadline::afterMs(held ? 2000 : 100); !bdl.expired();) {
      for (auto& e : b.waitEvents(100)) eventsB.push_back(e);
      if (held && degradedFromRetransmits(eventsB, rail0) + degradedFromRetransmits(eventsB, rail1) > 0) break;
    }
    // A DEGRADED that B emitted during that wait is a window A judged at the same retransmit
    // (both programs see each one, so their windows open together): read A again, the streams
    // still running, so that its held count covers every event of B's that was collected.
    for (const auto& l : a.status().links) (l.watch.key == rail0 ? raEnd : raEnd1) = l.retrans;
    EXPECT_GT(s0.sent() + s2.sent(), 0u);
    EXPECT_GT(s1.sent() + s3.sent(), 0u);
  }
  a.stop();
  b.stop();
  int byCountOnly = degradedFromRetransmits(eventsB, rail0) + degradedFromRetransmits(eventsB, rail1);
  EXPECT_EQ(degradedFromRetransmits(eventsA, rail0), 0) << "saturated, fault-free rail0 declared DEGRADED";
  EXPECT_EQ(degradedFromRetransmits(eventsA, rail1), 0) << "saturated, fault-free rail1 declared DEGRADED";
  printf("saturated, no fault: retransmits rail0 %llu (held by the rate %llu, failed attempts %llu), "
         "rail1 %llu (held %llu, failed attempts %llu); highest lost rate of a window at the count: rail0 %llu ppm, "
         "rail1 %llu ppm (limit %u); last window retransmitted / D-SACKed segments: rail0 %llu / %llu, rail1 %llu / %llu\n",
         (unsigned long long)raEnd.retransmits, (unsigned long long)raEnd.heldByRate, (unsigned long long)raEnd.failedAttempts,
         (unsigned long long)raEnd1.retransmits, (unsigned long long)raEnd1.heldByRate,
         (unsigned long long)raEnd1.failedAttempts, (unsigned long long)maxLastPpm[0], (unsigned long long)maxLastPpm[1],
         BpfOptions{}.retransRatePpm, (unsigned long long)raEnd.lastRetransSegs, (unsigned long long)raEnd.lastDsackSegs,
         (unsigned long long)raEnd1.lastRetransSegs, (unsigned long long)raEnd1.lastDsackSegs);
  printf("closed windows (retransmits:retransmitted/D-SACKed/sent segments): rail0%s; rail1%s\n"
         "running window at each DEGRADED:%s\n",
         windows[0].c_str(), windows[1].c_str(), atDegraded.empty() ? " none" : atDegraded.c_str());
  // Only meaningful if the count was crossed: the count-only detector fired, and the rate held.
  if (byCountOnly == 0 && ra.heldByRate + ra1.heldByRate == 0)
    GTEST_SKIP() << "saturation made no window of " << kThreshold << " retransmits on this machine: nothing to judge";
  EXPECT_GE(byCountOnly, 1) << "windows crossed the count but the count-only detector declared nothing";
  EXPECT_GT(raEnd.heldByRate + raEnd1.heldByRate, 0u) << "the count-only detector fired but the rate check was never asked";
}

TEST_F(DetectorRetransmit, OnePercentDropDegradesExactlyThatRail) {
  DetectorOptions opts = DetectorOptions::fromEnv();
  opts.mode = SourceMode::kBpf;
  opts.rdma = false;
  opts.watch = {{netns(0), "rail0"}, {netns(0), "rail1"}};
  auto det = Detector::create(opts);
  ASSERT_TRUE(det.ok()) << det.status().ToString();
  Detector& d = **det;
  if (!d.activeSources().count(RECCL_LINK_SRC_TP_TCP_RETRANSMIT))
    GTEST_SKIP() << "the tcp_retransmit_skb hook does not load on this kernel";
  ASSERT_TRUE(d.start().ok());
  LinkKey rail0, rail1;
  for (const auto& w : d.watched()) (w.ifname == "rail0" ? rail0 : rail1) = w.key;
  ASSERT_NE(rail0.ifindex, 0u);
  ASSERT_NE(rail1.ifindex, 0u);

  auto h0 = openNetns(netns(0));
  auto h1 = openNetns(netns(1));
  ASSERT_TRUE(h0.ok() && h1.ok());
  std::string cli = RECCL_CLI_PATH;
  std::string target = " --netns " + netns(0) + " --dev rail0 --side switch";
  int degraded0 = 0, degraded1 = 0, other = 0;
  uint64_t firstMs = 0;
  {
    Stream s0(*h0, *h1, railAddr(0, 0), railAddr(1, 0));
    Stream s1(*h0, *h1, railAddr(0, 1), railAddr(1, 1));
    ASSERT_EQ(s0.error(), "");
    ASSERT_EQ(s1.error(), "");
    // Clean baseline: both rails loaded, no loss: no gray signal.
    auto drainFor = [&](int ms, bool stopAtRail0) {
      reccl::Deadline dl = reccl::Deadline::afterMs(ms);
      while (!dl.expired()) {
        for (const auto& e : d.waitEvents(static_cast<int>(std::max<int64_t>(1, dl.remainingMsForPoll())))) {
          if (e.type == LinkEventType::kLinkDegraded && e.link == rail0 &&
              e.source == RECCL_LINK_SRC_TP_TCP_RETRANSMIT)
            ++degraded0;
          else if (e.type == LinkEventType::kLinkDegraded && e.link == rail1)
            ++degraded1;
          else
            ++other;
        }
        if (stopAtRail0 && degraded0 > 0) return;
      }
    };
    drainFor(1000, false);
    EXPECT_EQ(degraded0 + degraded1 + other, 0) << "events on clean, loaded rails";
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(system((cli + " inject drop" + target + " --rate 0.01").c_str()), 0);
    drainFor(8000, true);
    firstMs = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
    // The clean rail keeps running a while longer under the same load.
    drainFor(1500, false);
    EXPECT_GT(s0.sent(), 0u);
    EXPECT_GT(s1.sent(), 0u);
  }
  uint64_t retrans[2] = {0, 0};
  for (const auto& w : d.watched())
    if (w.slot != RECCL_LINK_NO_SLOT) retrans[w.key == rail0 ? 0 : 1] = static_cast<uint64_t>(d.slots()[w.slot].retransmits);
  RetransWindowStats rw0;
  for (const auto& l : d.status().links)
    if (l.watch.key == rail0) rw0 = l.retrans;
  EXPECT_EQ(system((cli + " inject clear --netns " + netns(0) + " --dev rail0").c_str()), 0);
  d.stop();
  EXPECT_GE(degraded0, 1) << "no retransmit DEGRADED for the lossy rail0 within 8 s";
  EXPECT_EQ(degraded1, 0) << "DEGRADED for the clean rail1";
  EXPECT_EQ(other, 0) << "other events (link down/up) on rails that never went down";
  // How fast (firstMs) is reported, not asserted: it is a performance figure, and the 8 s drain
  // above is the deadline.
  printf("retransmit DEGRADED on rail0 %llu ms after 1 %% loss began; retransmits counted: rail0 %llu, rail1 %llu; "
         "rail0's last closed window: %llu retransmits, %llu of %llu segments retransmitted\n",
         (unsigned long long)firstMs, (unsigned long long)retrans[0], (unsigned long long)retrans[1],
         (unsigned long long)rw0.lastRetransmits, (unsigned long long)rw0.lastRetransSegs,
         (unsigned long long)rw0.lastSentSegs);
}

// Thin flows: 40 writes of 1 KiB a second, one segment each (docs/detector.md, "Gray failures").
constexpr auto kThinPeriod = std::chrono::milliseconds(25);
constexpr size_t kThinWrite = 1024;

void DetectorRetransmit::startDefaultDetector(std::unique_ptr<Detector>* out) {
  auto det = railDetector(netns(0), BpfOptions{}.retransThreshold, BpfOptions{}.retransRatePpm);
  ASSERT_TRUE(det.ok()) << det.status().ToString();
  if (!(*det)->activeSources().count(RECCL_LINK_SRC_TP_TCP_RETRANSMIT))
    GTEST_SKIP() << "the tcp_retransmit_skb hook does not load on this kernel";
  ASSERT_TRUE((*det)->start().ok());
  *out = std::move(*det);
}

// Every closed window of a link as "retransmits:retransmitted/D-SACKed/sent", appended when the
// link's last closed window changes: printed, so that a failure shows what the detector saw.
struct WindowLog {
  RetransWindowStats prev;
  std::string text;
  void note(const RetransWindowStats& w) {
    if (w.lastRetransmits != prev.lastRetransmits || w.lastRetransSegs != prev.lastRetransSegs ||
        w.lastDsackSegs != prev.lastDsackSegs || w.lastSentSegs != prev.lastSentSegs)
      text += " " + std::to_string(w.lastRetransmits) + ":" + std::to_string(w.lastRetransSegs) + "/" +
              std::to_string(w.lastDsackSegs) + "/" + std::to_string(w.lastSentSegs);
    prev = w;
  }
};

// A slow flow loses too few segments in one 500 ms window for the default count even at a heavy
// loss: 10 % of 20 segments, each recovered by a probe or a timeout, is 2-4 retransmits a window.
// The pooled windows of the last seconds reach it. The same flow on the clean rail at the same
// time retransmits nothing and must stay quiet.
TEST_F(DetectorRetransmit, SlowFlowWithTenPercentDropIsDegradedAndTheCleanOneIsNot) {
  std::unique_ptr<Detector> det;
  startDefaultDetector(&det);
  if (!det) return;
  Detector& d = *det;
  LinkKey rail0, rail1;
  for (const auto& w : d.watched()) (w.ifname == "rail0" ? rail0 : rail1) = w.key;
  auto h0 = openNetns(netns(0));
  auto h1 = openNetns(netns(1));
  ASSERT_TRUE(h0.ok() && h1.ok());
  int degraded0 = 0, degraded1 = 0, other = 0;
  int64_t firstMs = -1;
  WindowLog log0, log1;
  RetransWindowStats end0, end1;
  {
    Stream lossy(*h0, *h1, railAddr(0, 0), railAddr(1, 0), kThinPeriod, kThinWrite);
    Stream clean(*h0, *h1, railAddr(0, 1), railAddr(1, 1), kThinPeriod, kThinWrite);
    ASSERT_EQ(lossy.error(), "");
    ASSERT_EQ(clean.error(), "");
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(dropOnRail0("0.1"), 0);
    // Ten seconds for rail0, then two more for the clean rail1 to show a false DEGRADED.
    reccl::Deadline dl = reccl::Deadline::afterMs(10000);
    bool afterSet = false;
    while (!dl.expired()) {
      for (const auto& e : d.waitEvents(100)) {
        if (e.type == LinkEventType::kLinkDegraded && e.link == rail0 && e.source == RECCL_LINK_SRC_TP_TCP_RETRANSMIT) {
          if (degraded0++ == 0)
            firstMs = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
        } else if (e.type == LinkEventType::kLinkDegraded && e.link == rail1) {
          ++degraded1;
        } else if (!(e.link == rail0 && e.type == LinkEventType::kLinkUp)) {
          ++other;
        }
      }
      for (const auto& l : d.status().links) (l.watch.key == rail0 ? log0 : log1).note(l.retrans);
      if (degraded0 > 0 && !afterSet) {
        dl = reccl::Deadline::afterMs(2000);
        afterSet = true;
      }
    }
    for (const auto& l : d.status().links) (l.watch.key == rail0 ? end0 : end1) = l.retrans;
    EXPECT_GT(lossy.sent(), 0u);
    EXPECT_GT(clean.sent(), 0u);
  }
  EXPECT_EQ(clearRail0(), 0);
  d.stop();
  printf("slow flow, 10 %% drop on rail0: first DEGRADED %lld ms after the drop began (-1: none); retransmits "
         "rail0 %llu, rail1 %llu\nclosed windows (retransmits:retransmitted/D-SACKed/sent segments): rail0%s; rail1%s\n",
         (long long)firstMs, (unsigned long long)end0.retransmits, (unsigned long long)end1.retransmits,
         log0.text.c_str(), log1.text.c_str());
  EXPECT_GE(degraded0, 1) << "no retransmit DEGRADED for the slow lossy flow's rail0 within 10 s";
  EXPECT_EQ(degraded1, 0) << "DEGRADED for the slow clean flow's rail1";
  EXPECT_EQ(other, 0) << "other events (link down/up) on rails that never went down";
}

// A DEGRADED from the pooled windows clears like any other once the loss stops: the evidence it
// used is not counted again, and the clean flow adds none, so the link is up again the clear
// time after the last DEGRADED -- at the latest the pool's span (a pooled DEGRADED from windows
// just before the drop stopped) plus the clear time after the drop stopped.
TEST_F(DetectorRetransmit, SlowFlowDegradedClearsOnceTheDropStops) {
  std::unique_ptr<Detector> det;
  startDefaultDetector(&det);
  if (!det) return;
  Detector& d = *det;
  LinkKey rail0;
  for (const auto& w : d.watched())
    if (w.ifname == "rail0") rail0 = w.key;
  auto h0 = openNetns(netns(0));
  auto h1 = openNetns(netns(1));
  ASSERT_TRUE(h0.ok() && h1.ok());
  const BpfOptions bpf = DetectorOptions::fromEnv().bpf;
  const int64_t clearMs = static_cast<int64_t>(DetectorOptions::fromEnv().stateMachine.degradedClearNs / 1'000'000);
  const int64_t poolMs = static_cast<int64_t>(bpf.retransPoolWindows * bpf.retransWindowNs / 1'000'000);
  Stream lossy(*h0, *h1, railAddr(0, 0), railAddr(1, 0), kThinPeriod, kThinWrite);
  ASSERT_EQ(lossy.error(), "");
  ASSERT_EQ(dropOnRail0("0.1"), 0);
  bool degraded = false;
  for (reccl::Deadline dl = reccl::Deadline::afterMs(10000); !dl.expired() && !degraded;)
    for (const auto& e : d.waitEvents(100))
      if (e.type == LinkEventType::kLinkDegraded && e.link == rail0) degraded = true;
  ASSERT_TRUE(degraded) << "no retransmit DEGRADED for the slow lossy flow's rail0 within 10 s";
  ASSERT_EQ(clearRail0(), 0);
  auto cleared = std::chrono::steady_clock::now();
  int64_t upMs = -1, lastDegradedMs = -1;
  for (reccl::Deadline dl = reccl::Deadline::afterMs(poolMs + clearMs + 1000); !dl.expired() && upMs < 0;) {
    for (const auto& e : d.waitEvents(100)) {
      if (e.link != rail0) continue;
      int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - cleared).count();
      if (e.type == LinkEventType::kLinkDegraded) lastDegradedMs = ms;
      if (e.type == LinkEventType::kLinkUp) upMs = ms;
    }
  }
  EXPECT_GT(lossy.sent(), 0u);
  d.stop();
  printf("slow flow: rail0 up %lld ms after the drop stopped (-1: not within %lld ms); last DEGRADED after the stop "
         "at %lld ms (-1: none)\n",
         (long long)upMs, (long long)(poolMs + clearMs + 1000), (long long)lastDegradedMs);
  EXPECT_GE(upMs, 0) << "rail0 still degraded " << poolMs + clearMs + 1000 << " ms after the drop stopped";
}

}  // namespace
