// The migration handshake's wire format and epoch rules.
#include <gtest/gtest.h>

#include <array>
#include <random>

#include "failover/migration/migrate_wire.h"

namespace reccl::failover {
namespace {

MigrateRequest sample() {
  MigrateRequest r;
  r.conn = {3, 5, 2};
  r.initiator = Role::kReceiver;
  r.reason = MigrateReason::kStall;
  r.rail = 1;
  r.epoch = 7;
  r.received = 1000;
  r.applied = 998;
  r.railsUp = 0b10;
  return r;
}

TEST(MigrateWire, RequestRoundTrip) {
  std::array<std::byte, kMigrateRequestBytes> b;
  encodeMigrateRequest(sample(), b);
  auto r = decodeMigrateRequest(b);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->conn, (ConnId{3, 5, 2}));
  EXPECT_EQ(r->initiator, Role::kReceiver);
  EXPECT_EQ(r->reason, MigrateReason::kStall);
  EXPECT_EQ(r->rail, 1);
  EXPECT_EQ(r->epoch, 7u);
  EXPECT_EQ(r->received, 1000u);
  EXPECT_EQ(r->applied, 998u);
  EXPECT_EQ(r->railsUp, 0b10u);
  EXPECT_FALSE(r->streamPath);
}

// A relay's origin asks for a byte-stream path at the peer (a verbs peer keeps its side channel);
// the flag is one byte at offset 50, 0 or 1, and never on a standby (a relay opens none).
TEST(MigrateWire, StreamPathFlagRoundTripsAndIsChecked) {
  std::array<std::byte, kMigrateRequestBytes> b;
  MigrateRequest r = sample();
  r.streamPath = true;
  encodeMigrateRequest(r, b);
  EXPECT_EQ(b[50], std::byte{1});
  auto d = decodeMigrateRequest(b);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE(d->streamPath);
  auto c = b;
  c[50] = std::byte{2};
  auto bad = decodeMigrateRequest(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("stream-path flag 2"), std::string::npos) << bad.status().message();
  r.reason = MigrateReason::kStandby;
  r.epoch = 3;  // a receiver's placeholder
  encodeMigrateRequest(r, b);
  bad = decodeMigrateRequest(b);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("standby over a relay"), std::string::npos) << bad.status().message();
}

TEST(MigrateWire, RequestRejectsMalformed) {
  std::array<std::byte, kMigrateRequestBytes> b;
  auto expectBad = [&](auto mutate, const char* what) {
    MigrateRequest r = sample();
    mutate(r);
    encodeMigrateRequest(r, b);
    auto d = decodeMigrateRequest(b);
    EXPECT_FALSE(d.ok()) << what;
    if (!d.ok()) {
      EXPECT_EQ(d.status().code(), Errc::kProtocol) << what;
    }
  };
  expectBad([](MigrateRequest& r) { r.epoch = 1; }, "epoch 1 is the first path, not a migration");
  expectBad([](MigrateRequest& r) { r.epoch = 8; }, "receiver-initiated epochs are odd");
  expectBad([](MigrateRequest& r) { r.applied = r.received + 1; }, "applied beyond received");
  expectBad([](MigrateRequest& r) { r.conn.receiver = r.conn.sender; }, "self connection");
  expectBad([](MigrateRequest& r) { r.conn.sender = -1; }, "negative rank");
  expectBad([](MigrateRequest& r) { r.conn.channel = 64; }, "channel range");
  expectBad([](MigrateRequest& r) { r.rail = 64; }, "rail range");
  encodeMigrateRequest(sample(), b);
  EXPECT_FALSE(decodeMigrateRequest(std::span<const std::byte>(b.data(), b.size() - 1)).ok()) << "short";
  auto c = b;
  c[0] = std::byte{0};
  EXPECT_FALSE(decodeMigrateRequest(c).ok()) << "magic";
  c = b;
  c[4] = std::byte{9};
  EXPECT_FALSE(decodeMigrateRequest(c).ok()) << "version";
  c = b;
  c[6] = std::byte{2};
  EXPECT_FALSE(decodeMigrateRequest(c).ok()) << "role";
  c = b;
  c[7] = std::byte{0};
  EXPECT_FALSE(decodeMigrateRequest(c).ok()) << "reason";
  c = b;
  c[7] = std::byte{8};
  EXPECT_FALSE(decodeMigrateRequest(c).ok()) << "reason past the last one (standby = 7)";
  c = b;
  c[60] = std::byte{1};
  EXPECT_FALSE(decodeMigrateRequest(c).ok()) << "reserved bytes";
  c = b;
  c[51] = std::byte{1};
  EXPECT_FALSE(decodeMigrateRequest(c).ok()) << "the first reserved byte, after the stream-path flag";
}

TEST(MigrateWire, DegradedReasonRoundTrips) {
  std::array<std::byte, kMigrateRequestBytes> b;
  MigrateRequest r = sample();
  r.reason = MigrateReason::kDegraded;
  encodeMigrateRequest(r, b);
  EXPECT_EQ(b[7], std::byte{6});  // the wire value is part of the format
  auto d = decodeMigrateRequest(b);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->reason, MigrateReason::kDegraded);
  EXPECT_STREQ(reasonName(d->reason), "degraded");
}

// The fault-move stamps count the moves a fault caused; a fail-back or rebalance after the
// recovery must not end the fault's stall.
TEST(MigrateWire, OnlyMovesAwayFromAFaultAreFaultMoves) {
  for (auto r : {MigrateReason::kLinkDown, MigrateReason::kSocketError, MigrateReason::kStall, MigrateReason::kDegraded})
    EXPECT_TRUE(isMoveAwayFromFault(r)) << reasonName(r);
  for (auto r : {MigrateReason::kFailBack, MigrateReason::kRebalance, MigrateReason::kStandby})
    EXPECT_FALSE(isMoveAwayFromFault(r)) << reasonName(r);
}

TEST(MigrateWire, ReplyRoundTripAndRejects) {
  MigrateReply r;
  r.status = MigrateStatus::kStale;
  r.epoch = 9;
  r.received = 50;
  r.applied = 49;
  r.railsUp = 3;
  std::array<std::byte, kMigrateReplyBytes> b;
  encodeMigrateReply(r, b);
  auto d = decodeMigrateReply(b);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->status, MigrateStatus::kStale);
  EXPECT_EQ(d->epoch, 9u);
  EXPECT_EQ(d->received, 50u);
  EXPECT_EQ(d->applied, 49u);
  EXPECT_EQ(d->railsUp, 3u);
  auto c = b;
  c[4] = std::byte{static_cast<uint8_t>(MigrateStatus::kPeerFailed)};
  auto pf = decodeMigrateReply(c);
  ASSERT_TRUE(pf.ok()) << pf.status().ToString();
  EXPECT_EQ(pf->status, MigrateStatus::kPeerFailed);
  c[4] = std::byte{5};
  EXPECT_FALSE(decodeMigrateReply(c).ok()) << "status";
  r.applied = 51;
  encodeMigrateReply(r, b);
  EXPECT_FALSE(decodeMigrateReply(b).ok()) << "applied beyond received";
  EXPECT_FALSE(decodeMigrateReply(std::span<const std::byte>(b.data(), 10)).ok()) << "short";
}

TEST(MigrateWire, RandomBytesNeverCrashAndDecodedRequestsReencodeIdentically) {
  std::mt19937_64 rng(42);
  std::array<std::byte, kMigrateRequestBytes> b;
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    encodeMigrateRequest(sample(), b);
    // Mutate a few bytes of a valid request so that some stay valid.
    int n = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < n; ++k) b[rng() % b.size()] = static_cast<std::byte>(rng());
    auto d = decodeMigrateRequest(b);
    if (!d.ok()) continue;
    ++accepted;
    std::array<std::byte, kMigrateRequestBytes> again;
    encodeMigrateRequest(*d, again);
    ASSERT_EQ(again, b) << "iteration " << i;
  }
  EXPECT_GT(accepted, 0);
}

TEST(MigrateWire, EpochParityAndAcceptRule) {
  EXPECT_EQ(nextEpoch(1, Role::kSender), 2u);
  EXPECT_EQ(nextEpoch(1, Role::kReceiver), 3u);
  EXPECT_EQ(nextEpoch(2, Role::kSender), 4u);
  EXPECT_EQ(nextEpoch(2, Role::kReceiver), 3u);
  // Both ends propose at once from epoch 1: sender 2, receiver 3. The receiver refuses 2 (its
  // own 3 is pending), the sender accepts 3: both end on 3.
  uint32_t s = nextEpoch(1, Role::kSender), r = nextEpoch(1, Role::kReceiver);
  EXPECT_NE(s, r);
  EXPECT_FALSE(acceptProposal(s, 1, r));
  EXPECT_TRUE(acceptProposal(r, 1, s));
  EXPECT_FALSE(acceptProposal(3, 3, 0));  // replay of the epoch in force
  EXPECT_TRUE(acceptProposal(5, 3, 0));
}

}  // namespace
}  // namespace reccl::failover
