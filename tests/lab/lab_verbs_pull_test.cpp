// A rail cable pulled under verbs traffic between two lab hosts (lab.sh --vms 2 --rails 2).
// Rank 0 pulls rail0 through the qemu monitor while checked streams run on both rails: one QP
// pair on rail0 per QP setting (RECCL_LAB_VERBS_QP, "timeout:retry,..."), one on rail1. The
// default 16:1,18:1 (0.5 s and 2.1 s to a verdict) keeps CI away from the smallest settings users
// run (12:1, 14:2), which on a loaded TCG host also fail healthy links (docs/results/verbs-lab.md). Side by side in one run, on rank 0's clock from the kernel's
// carrier loss (the detector's fexit on netif_carrier_off): the detector's RDMA hook
// (ib_dispatch_event), its LinkDown, the verbs async PORT_ERR on the path's own device, and each
// rail0 QP's first completion error. Then both ends move the rail0 connections onto rail1 (new
// QPs; the slots were registered there up front), every step arrives exactly once, rail1 never
// stopped, and after the cable is back RECCL_TRANSPORT=auto picks verbs again.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <thread>

#include "reccl/detector/detector.h"
#include "transport/verbs/transport_choice.h"
#include "verbs_lab_util.h"

namespace reccl::lab {
namespace {

using detector::LinkSignal;

std::vector<QpSettings> settingsFromEnv() {
  const char* v = getenv("RECCL_LAB_VERBS_QP");
  std::istringstream in(v && *v ? v : "16:1,18:1");
  std::vector<QpSettings> out;
  for (std::string item; std::getline(in, item, ',');) {
    QpSettings s;
    s.timeout = static_cast<uint8_t>(atoi(item.c_str()));
    s.retryCnt = static_cast<uint8_t>(atoi(item.substr(item.find(':') + 1).c_str()));
    out.push_back(s);
  }
  return out;
}

// What the sources reported, on this VM's CLOCK_MONOTONIC.
struct Timeline {
  std::mutex mu;
  std::vector<std::pair<LinkSignal, uint64_t>> signals;  // with the time userspace got it
  std::vector<RailDevice::AsyncEvent> asyncEvents;        // rail0's device, as the path's context sees them

  std::optional<std::pair<LinkSignal, uint64_t>> signal(detector::LinkSource src, detector::LinkKind kind) {
    std::lock_guard lk(mu);
    for (auto& s : signals)
      if (s.first.source == src && s.first.kind == kind) return s;
    return std::nullopt;
  }
  std::optional<uint64_t> async(ibv_event_type t) {
    std::lock_guard lk(mu);
    for (auto& e : asyncEvents)
      if (e.type == t) return e.readNs;
    return std::nullopt;
  }
};

template <typename F>
bool waitFor(int ms, F done) {
  for (Deadline dl = Deadline::afterMs(ms); !dl.expired(); usleep(1000))
    if (done()) return true;
  return done();
}

void requestCable(const char* nic, bool up) {
  printf("\n@@lab-monitor set_link %s %s\n", nic, up ? "on" : "off");
  fflush(stdout);
}

double msAfter(uint64_t t, uint64_t t0) { return (static_cast<double>(t) - static_cast<double>(t0)) / 1e6; }

RankRdma readiness(int rank, std::span<const std::unique_ptr<RailDevice>> rails) {
  std::vector<RailNic> nics;
  for (auto& r : rails) nics.push_back(railNicByName(r->netdev()).value());
  return railReadiness(rank, readRdmaInventory().value(), nics);
}

TEST_F(VerbsLab, RailPullFailsItsQpsAndTheConnectionsMoveToTheOtherRail) {
  const int rank = peer_->rank();
  const uint64_t steps = static_cast<uint64_t>(envInt("RECCL_LAB_VERBS_PULL_STEPS", 400));
  const std::vector<QpSettings> settings = settingsFromEnv();
  // rxe takes retry count 7 for "retry for ever" (rxe_comp.c: `if (qp->comp.retry_cnt != 7)
  // qp->comp.retry_cnt--`), as the IB spec does only for the RNR retry count; hardware gives up
  // after 7 retries. Such a QP never reports the dead link here: it is timed, not waited for.
  const bool rxe = rails_[0]->port().device.rfind("rxe", 0) == 0;
  auto forEver = [&](const QpSettings& s) { return rxe && s.retryCnt == 7; };
  std::vector<DuplexSpec> specs;
  uint64_t slowestNs = 0;
  for (const QpSettings& s : settings) {
    specs.push_back({0, s});
    if (!forEver(s)) slowestNs = std::max(slowestNs, retryExhaustedNs(s));
  }
  specs.push_back({1, {}});
  const int waitMs = static_cast<int>(slowestNs / 1'000'000) * 2 + 30'000;

  // Failover's hook: a failed path is being handled (moved below), not a failed connection.
  channel::PortEnv env;
  std::atomic<int> failures{0};
  env.pathFailureHook.install([&](const channel::PortId&, const channel::Path*, bool, const Status& s) {
    printf("path failure: %s\n", s.ToString().c_str());
    failures.fetch_add(1);
    return true;
  });
  Timeline tl;
  std::unique_ptr<detector::Detector> det;
  if (rank == 0) {
    detector::DetectorOptions o;
    o.mode = detector::SourceMode::kBpf;
    o.bpf.sources = {RECCL_LINK_SRC_FENTRY_CARRIER, RECCL_LINK_SRC_FENTRY_IB_DISPATCH};
    o.rdma = true;
    o.rtnetlink = true;
    o.stateMachine.holdDownNs = 200'000'000;
    o.watch = {{"", rails_[0]->netdev()}};
    auto d = detector::Detector::create(o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    det = std::move(*d);
    det->setSignalObserver([&](const LinkSignal& s, uint64_t recvNs) {
      std::lock_guard lk(tl.mu);
      tl.signals.emplace_back(s, recvNs);
    });
    ASSERT_TRUE(det->start().ok());
  }
  std::atomic<bool> stopAsync{false};
  std::thread asyncWatch([&] {
    pollfd p{rails_[0]->asyncFd(), POLLIN, 0};
    while (!stopAsync.load()) {
      if (poll(&p, 1, 20) <= 0) continue;
      auto evs = rails_[0]->readAsyncEvents();
      std::lock_guard lk(tl.mu);
      tl.asyncEvents.insert(tl.asyncEvents.end(), evs.begin(), evs.end());
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      t.join();
    }
  } joinAsync{stopAsync, asyncWatch};

  auto made = makeDuplexes(specs, rails_, *peer_, *engine_, &env, {}, kSlots, 8 * 1024);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  auto& ds = *made;
  EngineDetach detach{engine_.get(), &ds};
  const size_t rail1 = ds.size() - 1;
  Streams run(ds, rank, steps, waitMs);
  AbortOnExit stopStreams{env};  // a failed assertion ends the streams' waits at once
  auto allPast = [&](uint64_t n) {
    return std::all_of(ds.begin(), ds.end(), [&](auto& d) { return d->verified.load() >= n && d->posted.load() >= n; });
  };
  ASSERT_TRUE(waitFor(60'000, [&] { return allPast(30) || failures.load() > 0; }) && failures.load() == 0)
      << "the streams did not start, or a QP failed on a healthy link";
  for (auto& d : ds) ASSERT_LT(d->posted.load(), steps) << "stream " << d->stream << " ended before the pull";

  uint64_t t0 = 0, rail1AtFault = 0;
  if (rank == 0) {
    const uint64_t requested = monotonicNs();
    requestCable(rails_[0]->netdev().c_str(), false);
    const bool lost = waitFor(10'000, [&] { return tl.signal(RECCL_LINK_SRC_FENTRY_CARRIER, RECCL_LINK_KIND_CARRIER_DOWN).has_value(); });
    if (lost) t0 = tl.signal(RECCL_LINK_SRC_FENTRY_CARRIER, RECCL_LINK_KIND_CARRIER_DOWN)->first.tsNs;
    rail1AtFault = ds[rail1]->verified.load();
    // Sent either way (0: no pull), so that the far end does not read a later exchange as it.
    ASSERT_TRUE(peer_->send(std::as_bytes(std::span(&t0, 1))).ok());
    ASSERT_TRUE(lost) << "no carrier loss of " << rails_[0]->netdev();
    printf("pull requested; carrier lost %.1f ms later (the host serves the console every 50 ms)\n", msAfter(t0, requested));
  } else {
    ASSERT_TRUE(peer_->recv(std::as_writable_bytes(std::span(&t0, 1))).ok());
    ASSERT_NE(t0, 0u) << "rank 0 saw no carrier loss of its rail0";
    t0 = monotonicNs();  // the far end sees nothing of the fault: its clock starts at the notice
    rail1AtFault = ds[rail1]->verified.load();
  }
  // A QP reports a dead link only when it has something to send: each directed connection on
  // rail0 has a QP with work outstanding at one of its ends (the sender's next steps, or the
  // receiver's acks for the steps it has), but which end is a race. Both VMs compare notes until
  // every connection failed at one end.
  auto failedMask = [&] {
    uint64_t m = 0;
    for (size_t i = 0; i < rail1; ++i)
      m |= uint64_t{ds[i]->sendPath->failure().has_value()} << (2 * i) |
           uint64_t{ds[i]->recvPath->failure().has_value()} << (2 * i + 1);
    return m;
  };
  auto everyConnectionFailed = [&](uint64_t mine, uint64_t theirs) {
    for (size_t i = 0; i < rail1; ++i) {
      if (forEver(ds[i]->settings)) continue;
      const bool out = (mine >> (2 * i) & 1) || (theirs >> (2 * i + 1) & 1);  // this end's sends
      const bool in = (mine >> (2 * i + 1) & 1) || (theirs >> (2 * i) & 1);
      if (!out || !in) return false;
    }
    return true;
  };
  // One value per round from each end (its mask, and whether its deadline passed), and both
  // judge the same pair: they leave at the same round.
  constexpr uint64_t kExpired = 1ull << 63;
  bool allFailed = false;
  uint64_t mine = 0, theirs = 0;
  for (Deadline dl = Deadline::afterMs(static_cast<int64_t>(slowestNs / 1'000'000) * 2 + 5000);; usleep(20'000)) {
    mine = failedMask() | (dl.expired() ? kExpired : 0);
    auto t = peer_->exchangeU64(mine);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    theirs = *t;
    allFailed = everyConnectionFailed(mine & ~kExpired, theirs & ~kExpired);
    if (allFailed || ((mine | theirs) & kExpired)) break;
  }
  EXPECT_TRUE(allFailed) << "a rail0 connection saw no completion error at either end: mask here " << (mine & ~kExpired)
                         << ", there " << (theirs & ~kExpired);
  EXPECT_FALSE(ds[rail1]->sendPath->failure()) << "rail1 failed too";
  EXPECT_FALSE(ds[rail1]->recvPath->failure()) << "rail1 failed too";
  EXPECT_GT(ds[rail1]->verified.load(), rail1AtFault) << "rail1 stalled while rail0 was down";

  std::ostringstream line;
  line.precision(2);
  line << std::fixed << "@@verbs pull rank=" << rank << (rank == 0 ? " from carrier loss (fexit netif_carrier_off):" : " from rank 0's notice:");
  if (rank == 0) {
    EXPECT_TRUE(waitFor(5000, [&] { return tl.async(IBV_EVENT_PORT_ERR).has_value(); })) << "no IBV_EVENT_PORT_ERR";
    EXPECT_TRUE(waitFor(5000, [&] {
      return tl.signal(RECCL_LINK_SRC_FENTRY_IB_DISPATCH, RECCL_LINK_KIND_RDMA_PORT_ERR).has_value();
    })) << "fentry ib_dispatch_event saw no port error";
    auto ib = tl.signal(RECCL_LINK_SRC_FENTRY_IB_DISPATCH, RECCL_LINK_KIND_RDMA_PORT_ERR);
    auto rdmaAsync = tl.signal(RECCL_LINK_SRC_RDMA_ASYNC, RECCL_LINK_KIND_RDMA_PORT_ERR);
    auto nl = tl.signal(RECCL_LINK_SRC_RTNETLINK, RECCL_LINK_KIND_CARRIER_DOWN);
    auto carrier = tl.signal(RECCL_LINK_SRC_FENTRY_CARRIER, RECCL_LINK_KIND_CARRIER_DOWN);
    line << " carrier fentry delivered +" << msAfter(carrier->second, t0) << " ms";
    if (ib) line << ", ib_dispatch_event fentry +" << msAfter(ib->first.tsNs, t0) << " ms (delivered +" << msAfter(ib->second, t0) << ")";
    if (rdmaAsync) line << ", detector async PORT_ERR +" << msAfter(rdmaAsync->second, t0) << " ms";
    if (auto a = tl.async(IBV_EVENT_PORT_ERR)) line << ", path device async PORT_ERR +" << msAfter(*a, t0) << " ms";
    if (nl) line << ", rtnetlink +" << msAfter(nl->second, t0) << " ms";
    for (auto& e : det->waitEvents(0))
      if (e.type == detector::LinkEventType::kLinkDown)
        line << ", LinkDown (" << detector::sourceName(e.source) << ") +" << msAfter(e.emitNs, t0) << " ms";
  }
  for (size_t i = 0; i < rail1; ++i)
    for (VerbsPath* p : {static_cast<VerbsPath*>(ds[i]->sendPath), static_cast<VerbsPath*>(ds[i]->recvPath)})
      if (auto f = p->failure(); !f)
        line << ", " << (p == ds[i]->sendPath ? "send" : "recv") << " qp timeout " << int(ds[i]->settings.timeout)
             << " retry " << int(ds[i]->settings.retryCnt) << ": no error in " << msAfter(monotonicNs(), t0) << " ms"
             << (forEver(ds[i]->settings) ? " (rxe retries for ever at 7)" : "") << " (" << p->qp().sendsOutstanding()
             << " sends outstanding; steps posted " << ds[i]->send->posted() << " acked " << ds[i]->send->acked()
             << " received " << ds[i]->recv->received() << " applied " << ds[i]->recv->applied() << ")";
      else
        line << ", " << (p == ds[i]->sendPath ? "send" : "recv") << " qp timeout " << int(ds[i]->settings.timeout)
             << " retry " << int(ds[i]->settings.retryCnt) << " (budget " << retryExhaustedNs(ds[i]->settings) / 1e6
             << " ms): " << ibv_wc_status_str(f->status) << " +" << msAfter(f->ns, t0) << " ms";
  printf("%s\n", line.str().c_str());
  // Every failed path was handed to failover's hook, at whichever end it failed; one end may
  // have none (its QPs had nothing outstanding when the cable went), but the two together do.
  EXPECT_TRUE(waitFor(2000, [&] { return failures.load() == std::popcount(failedMask()); }))
      << failures.load() << " path failures reported, " << std::popcount(failedMask()) << " paths failed";
  auto theirFailures = peer_->exchangeU64(static_cast<uint64_t>(failures.load()));
  ASSERT_TRUE(theirFailures.ok()) << theirFailures.status().ToString();
  EXPECT_GT(static_cast<uint64_t>(failures.load()) + *theirFailures, 0u) << "no path failed at either end";

  // Both ends move rail0's connections onto rail1 the way failover would.
  ASSERT_TRUE(peer_->barrier(0x30ed).ok());
  const uint64_t moveStart = monotonicNs();
  std::vector<double> resumed;
  for (size_t i = 0; i < rail1; ++i) {
    // The new QPs take rail1's settings: under TCG a healthy link's round trip can exceed the
    // smallest timeouts (16.8 ms x 2 at 12:1), and the moved streams must finish.
    ds[i]->settings = ds[rail1]->settings;
    uint64_t at = 0;
    // Every other connection resends from its own last ack, so that the receivers' duplicate
    // rule runs too.
    Status s = moveDuplex(*ds[i], 1, rails_, *peer_, *engine_, {},
                          i % 2 ? ResendFrom::kOwnAcked : ResendFrom::kPeerApplied, &at);
    ASSERT_TRUE(s.ok()) << s.ToString();
    resumed.push_back(msAfter(at, moveStart));
  }
  for (size_t i = 0; i < rail1; ++i) {
    Status s = retireOld(*ds[i]);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::ostringstream moved;
  moved.precision(1);
  for (double r : resumed) moved << std::fixed << " " << r;
  printf("@@verbs move rank=%d %zu connections onto rail1, one after the other: resumed at%s ms; all old QPs retired "
         "(drained, destroyed) by %.1f ms\n", rank, rail1, moved.str().c_str(), msAfter(monotonicNs(), moveStart));
  // The retired QPs are gone from the kernel, not kept until their ports go; rail1's remain.
  EXPECT_EQ(rdmaResources("qp", rails_[0]->port().device), 0);
  EXPECT_EQ(rdmaResources("qp", rails_[1]->port().device), 2 * static_cast<int>(ds.size()));
  run.join();
  for (auto& d : ds) {
    EXPECT_TRUE(d->sendResult.ok()) << "stream " << d->stream << ": " << d->sendResult.ToString();
    EXPECT_TRUE(d->recvResult.ok()) << "stream " << d->stream << ": " << d->recvResult.ToString();
    EXPECT_EQ(d->verified.load(), steps) << "stream " << d->stream;
  }
  uint64_t expectedDuplicates = 0;
  for (auto& d : ds) expectedDuplicates += d->expectedDuplicates;
  EXPECT_EQ(env.duplicateSteps.load(), expectedDuplicates) << "steps resent that this end had";
  EXPECT_EQ(env.staleSteps.load(), 0u);
  printf("duplicate steps dropped: %llu (expected %llu)\n", static_cast<unsigned long long>(env.duplicateSteps.load()),
         static_cast<unsigned long long>(expectedDuplicates));

  // The cable back: the port turns ACTIVE again and auto picks verbs once more.
  if (rank == 0) {
    RankRdma down = readiness(rank, rails_);
    EXPECT_FALSE(down.ready);
    EXPECT_NE(down.reason.find("rxe_rail0 port 1 is"), std::string::npos) << down.reason;
    requestCable(rails_[0]->netdev().c_str(), true);
    EXPECT_TRUE(waitFor(10'000, [&] { auto a = rails_[0]->portActive();
      return a.ok() && *a; })) << "rail0 stayed down";
    EXPECT_TRUE(waitFor(5000, [&] { return tl.async(IBV_EVENT_PORT_ACTIVE).has_value(); })) << "no IBV_EVENT_PORT_ACTIVE";
    RankRdma up = readiness(rank, rails_);
    EXPECT_TRUE(up.ready) << up.reason;
    std::vector<RankRdma> before = {down, {1, true, ""}}, after = {up, {1, true, ""}};
    EXPECT_FALSE(decideTransport(TransportMode::kAuto, before)->verbs);
    EXPECT_TRUE(decideTransport(TransportMode::kAuto, after)->verbs);
  }
  closeAll(ds);
}

}  // namespace
}  // namespace reccl::lab
