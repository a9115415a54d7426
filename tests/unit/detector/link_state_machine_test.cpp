// The link state machine with injected time: debounce, hold-down, damping math, gray failures.
#include <gtest/gtest.h>

#include <cmath>

#include "reccl/detector/link_state_machine.h"

namespace reccl::detector {
namespace {

constexpr uint64_t kMs = 1'000'000;
const LinkKey kLink{4026531840u, 7};
const LinkKey kOther{4026531840u, 8};

LinkSignal sig(LinkKind kind, LinkSource src, uint64_t ts, std::optional<uint64_t> seq = std::nullopt,
               std::optional<uint32_t> downs = std::nullopt, LinkKey key = kLink) {
  LinkSignal s;
  s.kind = kind;
  s.source = src;
  s.tsNs = ts;
  s.link = key;
  s.carrierSeq = seq;
  s.carrierDowns = downs;
  return s;
}

StateMachineParams params() {
  StateMachineParams p;
  p.holdDownNs = 100 * kMs;
  p.degradedClearNs = 500 * kMs;
  p.damping.penaltyPerFlap = 1000;
  p.damping.suppressThreshold = 3000;
  p.damping.reuseThreshold = 1000;
  p.damping.halfLifeNs = 1000 * kMs;
  p.damping.maxPenalty = 12000;
  return p;
}

TEST(LinkStateMachine, FirstDownSignalWinsAndDuplicatesAreDebounced) {
  LinkStateMachine sm(params());
  sm.addLink(kLink, "eth0", true, 0);
  sm.addLink(kOther, "eth1", true, 0);
  std::vector<LinkEvent> out;
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_DOWN, RECCL_LINK_SRC_RAWTP_LINKWATCH, 1000, 3, 2), 1100, out);
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_DOWN, RECCL_LINK_SRC_TP_QDISC_RESET, 1200, 3, 2), 1300, out);
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_DOWN, RECCL_LINK_SRC_RTNETLINK, 9000, 3, 2), 9000, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, LinkEventType::kLinkDown);
  EXPECT_EQ(out[0].link, kLink);
  EXPECT_EQ(out[0].source, RECCL_LINK_SRC_RAWTP_LINKWATCH);
  EXPECT_EQ(out[0].signalNs, 1000u);
  EXPECT_EQ(out[0].emitNs, 1100u);
  EXPECT_EQ(sm.counters().debounced, 2u);
  EXPECT_EQ(sm.status(kOther, 9000)->state, LinkState::kUp) << "other link untouched";
}

TEST(LinkStateMachine, StaleReportOfAnOlderTransitionIsIgnored) {
  LinkStateMachine sm(params());
  sm.addLink(kLink, "eth0", true, 0);
  std::vector<LinkEvent> out;
  // Fast source sees down (seq 3) and up (seq 4); the slow one reports the down afterwards.
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_DOWN, RECCL_LINK_SRC_TP_QDISC_RESET, 10, 3, 2), 10, out);
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_UP, RECCL_LINK_SRC_RAWTP_LINKWATCH, 20, 4, 2), 20, out);
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_DOWN, RECCL_LINK_SRC_RTNETLINK, 30, 3, 2), 30, out);
  EXPECT_EQ(sm.counters().stale, 1u);
  auto st = sm.status(kLink, 30);
  EXPECT_TRUE(st->physicalUp);
  EXPECT_EQ(st->flaps, 1u);
}

TEST(LinkStateMachine, UpOnlyAfterHoldDown) {
  LinkStateMachine sm(params());
  sm.addLink(kLink, "eth0", true, 0);
  std::vector<LinkEvent> out;
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_DOWN, RECCL_LINK_SRC_TP_QDISC_RESET, 10 * kMs), 10 * kMs, out);
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_UP, RECCL_LINK_SRC_RTNETLINK, 20 * kMs), 20 * kMs, out);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(sm.nextDeadlineNs());
  EXPECT_EQ(*sm.nextDeadlineNs(), 120 * kMs);
  sm.onTick(119 * kMs, out);
  EXPECT_EQ(out.size(), 1u) << "no LinkUp before the hold-down ends";
  sm.onTick(120 * kMs, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].type, LinkEventType::kLinkUp);
  EXPECT_EQ(out[1].signalNs, 20 * kMs) << "LinkUp carries the first up signal's time";
  EXPECT_EQ(out[1].source, RECCL_LINK_SRC_RTNETLINK);
  EXPECT_FALSE(sm.nextDeadlineNs());
}

TEST(LinkStateMachine, DownDuringHoldDownCancelsItSilently) {
  LinkStateMachine sm(params());
  sm.addLink(kLink, "eth0", true, 0);
  std::vector<LinkEvent> out;
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_DOWN, RECCL_LINK_SRC_TP_QDISC_RESET, kMs), kMs, out);
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_UP, RECCL_LINK_SRC_RTNETLINK, 2 * kMs), 2 * kMs, out);
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_DOWN, RECCL_LINK_SRC_TP_QDISC_RESET, 50 * kMs), 50 * kMs, out);
  sm.onTick(200 * kMs, out);
  ASSERT_EQ(out.size(), 1u) << "the link never stayed up for the hold-down";
  EXPECT_EQ(sm.status(kLink, 200 * kMs)->flaps, 2u);
}

TEST(LinkStateMachine, DampingMath) {
  EXPECT_DOUBLE_EQ(LinkStateMachine::decayed(1000, 0, 1000), 1000);
  EXPECT_DOUBLE_EQ(LinkStateMachine::decayed(1000, 1000, 1000), 500);
  EXPECT_DOUBLE_EQ(LinkStateMachine::decayed(1000, 3000, 1000), 125);
  EXPECT_DOUBLE_EQ(LinkStateMachine::decayed(1000, 5, 0), 0) << "half-life 0 disables damping";
  // 4000 -> 1000 takes two half-lives.
  uint64_t t = LinkStateMachine::timeToDecayNs(4000, 1000, 1000 * kMs);
  EXPECT_NEAR(static_cast<double>(t), 2000.0 * kMs, 2.0);
  EXPECT_EQ(LinkStateMachine::timeToDecayNs(500, 1000, kMs), 0u);
}

TEST(LinkStateMachine, FlappingLinkIsSuppressedUntilPenaltyDecaysBelowReuse) {
  auto p = params();
  LinkStateMachine sm(p);
  sm.addLink(kLink, "eth0", true, 0);
  std::vector<LinkEvent> out;
  uint64_t t = 0;
  for (int i = 0; i < 4; ++i) {  // 4 flaps, 10 ms apart: penalty ~4000 > suppress 3000
    t += 5 * kMs;
    sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_DOWN, RECCL_LINK_SRC_TP_QDISC_RESET, t), t, out);
    t += 5 * kMs;
    sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_UP, RECCL_LINK_SRC_RTNETLINK, t), t, out);
  }
  ASSERT_EQ(out.size(), 1u) << "one LinkDown, then silence: no event storm";
  auto st = sm.status(kLink, t);
  EXPECT_TRUE(st->suppressed);
  EXPECT_GT(st->penalty, 3000);
  const uint64_t lastUp = t;
  // Hold-down passes, but damping keeps it down.
  sm.onTick(lastUp + p.holdDownNs, out);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(sm.counters().suppressedUps, 1u);
  // It comes back exactly when the penalty decays below reuse.
  double pen = sm.status(kLink, lastUp + p.holdDownNs)->penalty;
  uint64_t reuseAt = lastUp + p.holdDownNs + LinkStateMachine::timeToDecayNs(pen, 1000, p.damping.halfLifeNs);
  ASSERT_TRUE(sm.nextDeadlineNs());
  EXPECT_EQ(*sm.nextDeadlineNs(), reuseAt);
  sm.onTick(reuseAt - kMs, out);
  EXPECT_EQ(out.size(), 1u);
  sm.onTick(reuseAt, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].type, LinkEventType::kLinkUp);
  EXPECT_LT(out[1].penalty, 1000);
  EXPECT_FALSE(sm.status(kLink, reuseAt)->suppressed);
}

TEST(LinkStateMachine, FlapsTheKernelCoalescedStillCountAndDampTheLink) {
  LinkStateMachine sm(params());
  sm.addLink(kLink, "eth0", true, 0);
  std::vector<LinkEvent> out;
  // First report at downs=10; next report says up again but 30 carrier losses later.
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_UP, RECCL_LINK_SRC_RTNETLINK, 1, 20, 10), 1, out);
  EXPECT_TRUE(out.empty());
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_UP, RECCL_LINK_SRC_RTNETLINK, 2, 80, 40), 2, out);
  ASSERT_EQ(out.size(), 1u) << "a storm no source saw one by one must still take the link out";
  EXPECT_EQ(out[0].type, LinkEventType::kLinkDown);
  auto st = sm.status(kLink, 2);
  EXPECT_EQ(st->flaps, 30u);
  EXPECT_TRUE(st->suppressed);
  EXPECT_DOUBLE_EQ(st->penalty, 12000) << "penalty capped at maxPenalty";
}

TEST(LinkStateMachine, DegradedThenClearedAfterQuietTime) {
  LinkStateMachine sm(params());
  sm.addLink(kLink, "eth0", true, 0);
  std::vector<LinkEvent> out;
  sm.onSignal(sig(RECCL_LINK_KIND_DEGRADED, RECCL_LINK_SRC_TP_TCP_RETRANSMIT, 10 * kMs), 10 * kMs, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, LinkEventType::kLinkDegraded);
  EXPECT_EQ(out[0].source, RECCL_LINK_SRC_TP_TCP_RETRANSMIT);
  // Another symptom extends it.
  sm.onSignal(sig(RECCL_LINK_KIND_TX_TIMEOUT, RECCL_LINK_SRC_TP_XMIT_TIMEOUT, 300 * kMs), 300 * kMs, out);
  EXPECT_EQ(out.size(), 1u);
  sm.onTick(510 * kMs, out);
  EXPECT_EQ(out.size(), 1u) << "cleared too early";
  sm.onTick(800 * kMs, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].type, LinkEventType::kLinkUp);
  EXPECT_EQ(sm.status(kLink, 800 * kMs)->state, LinkState::kUp);
}

TEST(LinkStateMachine, DegradedLinkThatFailsGoesDown) {
  LinkStateMachine sm(params());
  sm.addLink(kLink, "eth0", true, 0);
  std::vector<LinkEvent> out;
  sm.onSignal(sig(RECCL_LINK_KIND_DEGRADED, RECCL_LINK_SRC_TP_TCP_RETRANSMIT, 1), 1, out);
  sm.onSignal(sig(RECCL_LINK_KIND_ADMIN_DOWN, RECCL_LINK_SRC_TP_QDISC_RESET, 2), 2, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].type, LinkEventType::kLinkDown);
  EXPECT_EQ(out[1].kind, RECCL_LINK_KIND_ADMIN_DOWN);
}

TEST(LinkStateMachine, UnknownLinksAndUninterestingKindsAreIgnored) {
  LinkStateMachine sm(params());
  sm.addLink(kLink, "eth0", true, 0);
  std::vector<LinkEvent> out;
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_DOWN, RECCL_LINK_SRC_RTNETLINK, 1, {}, {}, LinkKey{1, 1}), 1, out);
  sm.onSignal(sig(RECCL_LINK_KIND_LINKWATCH_SCHEDULED, RECCL_LINK_SRC_RAWTP_LINKWATCH, 1), 1, out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(sm.counters().unknownLink, 1u);
}

TEST(LinkStateMachine, LinkWatchedWhileDownComesUpAfterHoldDown) {
  LinkStateMachine sm(params());
  sm.addLink(kLink, "eth0", false, 0);
  std::vector<LinkEvent> out;
  sm.onSignal(sig(RECCL_LINK_KIND_CARRIER_UP, RECCL_LINK_SRC_RTNETLINK, kMs), kMs, out);
  sm.onTick(101 * kMs, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, LinkEventType::kLinkUp);
}

TEST(ClassifyTransition, OnlyUsabilityChangesAreEvents) {
  EXPECT_EQ(classifyTransition(true, true, true, false), RECCL_LINK_KIND_CARRIER_DOWN);
  EXPECT_EQ(classifyTransition(true, true, false, false), RECCL_LINK_KIND_ADMIN_DOWN);
  EXPECT_EQ(classifyTransition(true, false, true, true), RECCL_LINK_KIND_CARRIER_UP);
  EXPECT_EQ(classifyTransition(false, false, true, true), RECCL_LINK_KIND_ADMIN_UP);
  EXPECT_EQ(classifyTransition(false, false, true, false), RECCL_LINK_KIND_NONE) << "admin up, no carrier";
  EXPECT_EQ(classifyTransition(false, false, false, true), RECCL_LINK_KIND_NONE);
}

}  // namespace
}  // namespace reccl::detector
