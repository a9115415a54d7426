// The verbs transport's pure parts, without an RDMA device: the connection-info codec, the QP
// state transitions' attributes, the rail -> RDMA port mapping and RECCL_TRANSPORT's choice.
// The parts that need a device run in the stock-kernel lab (tests/lab/lab_verbs_test.cpp).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "transport/verbs/conn_info.h"
#include "transport/verbs/qp_settings.h"
#include "transport/verbs/rail_map.h"
#include "transport/verbs/transport_choice.h"

namespace {

using namespace reccl;
using namespace reccl::transport::verbs;

uint32_t ip(const char* s) {
  in_addr a{};
  inet_pton(AF_INET, s, &a);
  return a.s_addr;
}

ConnInfo sampleInfo() {
  ConnInfo c;
  c.role = ConnRole::kReceiver;
  c.mtu = IBV_MTU_1024;
  c.rail = 1;
  c.lid = 0;
  c.qpn = 0x11;
  c.psn = 0xabcdef;
  c.epoch = 3;
  c.gid = ipv4MappedGid(ip("10.77.2.1"));
  c.addr = 0x7f0012345000;
  c.rkey = 0xdeadbeef;
  c.slots = 8;
  c.chunkBytes = 512 * 1024;
  return c;
}

TEST(VerbsConnInfo, RoundTripsEveryField) {
  ConnInfo c = sampleInfo();
  std::array<std::byte, kConnInfoBytes> b;
  encodeConnInfo(c, b);
  auto d = decodeConnInfo(b);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(*d, c);
  EXPECT_EQ(describeConnInfo(c), "receiver qpn 0x11 psn 0xabcdef gid ::ffff:10.77.2.1 rail 1 epoch 3");
}

struct BadField {
  const char* name;
  void (*spoil)(std::array<std::byte, kConnInfoBytes>&);
  const char* message;
};

void PrintTo(const BadField& b, std::ostream* os) { *os << b.name; }

class VerbsConnInfoRejects : public ::testing::TestWithParam<BadField> {};

TEST_P(VerbsConnInfoRejects, NamesTheField) {
  std::array<std::byte, kConnInfoBytes> b;
  encodeConnInfo(sampleInfo(), b);
  GetParam().spoil(b);
  auto d = decodeConnInfo(b);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Errc::kProtocol);
  EXPECT_NE(d.status().message().find(GetParam().message), std::string::npos) << d.status().message();
}

template <typename T>
void putAt(std::array<std::byte, kConnInfoBytes>& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof(v));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, VerbsConnInfoRejects,
    ::testing::Values(BadField{"magic", [](auto& b) { putAt<uint32_t>(b, 0, 0); }, "bad magic"},
                      BadField{"version", [](auto& b) { putAt<uint16_t>(b, 4, 9); }, "unsupported version 9"},
                      BadField{"role", [](auto& b) { putAt<uint8_t>(b, 6, 3); }, "unknown role 3"},
                      BadField{"mtu", [](auto& b) { putAt<uint8_t>(b, 7, 6); }, "mtu code 6"},
                      BadField{"qpn", [](auto& b) { putAt<uint32_t>(b, 12, 0x1000000); }, "qpn 16777216"},
                      BadField{"reserved_qpn", [](auto& b) { putAt<uint32_t>(b, 12, 1); }, "qpn 1 "},
                      BadField{"psn", [](auto& b) { putAt<uint32_t>(b, 16, 0x1000000); }, "psn 16777216"},
                      BadField{"addr", [](auto& b) { putAt<uint64_t>(b, 40, 0); }, "null address"},
                      BadField{"slots", [](auto& b) { putAt<uint32_t>(b, 52, 0); }, "zero slots"},
                      BadField{"chunk", [](auto& b) { putAt<uint64_t>(b, 56, 0); }, "zero chunk"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(VerbsConnInfo, ShortRecordIsRefused) {
  std::array<std::byte, kConnInfoBytes> b;
  encodeConnInfo(sampleInfo(), b);
  auto d = decodeConnInfo(std::span(b).first(63));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("short record of 63 bytes"), std::string::npos);
}

TEST(VerbsConnInfo, PeerMustBeTheOtherRoleOnTheSameRailAndRing) {
  ConnInfo mine = sampleInfo(), peer = sampleInfo();
  peer.role = ConnRole::kSender;
  EXPECT_TRUE(checkPeerInfo(mine, peer).ok());
  ConnInfo same = sampleInfo();
  EXPECT_NE(checkPeerInfo(mine, same).message().find("same role"), std::string::npos);
  ConnInfo rail = peer;
  rail.rail = 0;
  EXPECT_NE(checkPeerInfo(mine, rail).message().find("rail 0 on the peer, 1 here"), std::string::npos);
  ConnInfo slots = peer;
  slots.slots = 4;
  EXPECT_NE(checkPeerInfo(mine, slots).message().find("4 slots on the peer, 8 here"), std::string::npos);
  ConnInfo chunk = peer;
  chunk.chunkBytes = 4096;
  EXPECT_NE(checkPeerInfo(mine, chunk).message().find("chunk of 4096 bytes on the peer"), std::string::npos);
}

TEST(VerbsQpSettings, TimeoutIsNcclsExponent) {
  EXPECT_EQ(ibTimeoutNs(20), 4096ull << 20);  // 4.29 s: NCCL's default
  EXPECT_EQ(ibTimeoutNs(14), 67108864ull);    // 67 ms
  EXPECT_EQ(ibTimeoutNs(12), 16777216ull);    // 16.8 ms
  QpSettings d;
  EXPECT_EQ(d.timeout, 20);
  EXPECT_EQ(d.retryCnt, 7);
  EXPECT_EQ(retryExhaustedNs(d), 8 * (4096ull << 20));  // ~34 s: what NCCL waits on a dead link
  QpSettings small;
  small.timeout = 12;
  small.retryCnt = 1;
  EXPECT_EQ(retryExhaustedNs(small), 2 * 16777216ull);
}

TEST(VerbsQpSettings, ParamsAreRangeChecked) {
  struct Case {
    const char* timeout;
    const char* retry;
    const char* gid;
    const char* error;  // nullptr: accepted
  } cases[] = {
      {"20", "7", "-1", nullptr},
      {"12", "1", "3", nullptr},
      {"0", "7", "-1", "RECCL_IB_TIMEOUT=0: expected 1..31"},
      {"32", "7", "-1", "RECCL_IB_TIMEOUT=32"},
      {"276", "7", "-1", "RECCL_IB_TIMEOUT=276"},  // not narrowed to 20
      {"20", "8", "-1", "RECCL_IB_RETRY_CNT=8: expected 0..7"},
      {"20", "-1", "-1", "RECCL_IB_RETRY_CNT=-1"},
      {"20", "7", "-2", "RECCL_IB_GID_INDEX=-2"},
  };
  for (const Case& c : cases) {
    setenv("RECCL_IB_TIMEOUT", c.timeout, 1);
    setenv("RECCL_IB_RETRY_CNT", c.retry, 1);
    setenv("RECCL_IB_GID_INDEX", c.gid, 1);
    auto s = qpSettingsFromParams();
    if (!c.error) {
      ASSERT_TRUE(s.ok()) << c.timeout << "/" << c.retry << ": " << s.status().message();
      EXPECT_EQ(s->timeout, atoi(c.timeout));
      EXPECT_EQ(s->retryCnt, atoi(c.retry));
      EXPECT_EQ(s->gidIndex, atoi(c.gid));
    } else {
      ASSERT_FALSE(s.ok()) << c.timeout << "/" << c.retry << "/" << c.gid;
      EXPECT_EQ(s.status().code(), Errc::kInvalidArgument);
      EXPECT_NE(s.status().message().find(c.error), std::string::npos) << s.status().message();
    }
  }
  unsetenv("RECCL_IB_TIMEOUT");
  unsetenv("RECCL_IB_RETRY_CNT");
  unsetenv("RECCL_IB_GID_INDEX");
  EXPECT_TRUE(qpSettingsFromParams().ok());
}

TEST(VerbsQpSettings, TransitionsCarryBothEnds) {
  LocalPort local{1, 3, IBV_MTU_4096};
  QpTransition init = initTransition(local);
  EXPECT_EQ(init.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(init.attr.port_num, 1);
  EXPECT_EQ(init.attr.qp_access_flags, IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(init.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);

  QpSettings s;
  s.timeout = 14;
  s.retryCnt = 2;
  ConnInfo remote = sampleInfo();  // RoCE: lid 0, 1024-byte MTU
  QpTransition rtr = rtrTransition(s, local, remote);
  EXPECT_EQ(rtr.attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(rtr.attr.path_mtu, IBV_MTU_1024) << "the smaller of both ends";
  EXPECT_EQ(rtr.attr.dest_qp_num, remote.qpn);
  EXPECT_EQ(rtr.attr.rq_psn, remote.psn);
  EXPECT_EQ(rtr.attr.ah_attr.is_global, 1);
  EXPECT_EQ(rtr.attr.ah_attr.grh.sgid_index, 3);
  EXPECT_EQ(0, std::memcmp(rtr.attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16));
  EXPECT_EQ(rtr.attr.ah_attr.dlid, 0);
  EXPECT_TRUE(rtr.mask & IBV_QP_AV);
  EXPECT_TRUE(rtr.mask & IBV_QP_MIN_RNR_TIMER);

  remote.lid = 7;  // InfiniBand: routed by LID
  remote.mtu = IBV_MTU_4096;
  QpTransition ib = rtrTransition(s, local, remote);
  EXPECT_EQ(ib.attr.ah_attr.is_global, 0);
  EXPECT_EQ(ib.attr.ah_attr.dlid, 7);
  EXPECT_EQ(ib.attr.path_mtu, IBV_MTU_4096);

  QpTransition rts = rtsTransition(s, 0x1abcdef);
  EXPECT_EQ(rts.attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(rts.attr.timeout, 14);
  EXPECT_EQ(rts.attr.retry_cnt, 2);
  EXPECT_EQ(rts.attr.rnr_retry, 7) << "a receiver short of receive requests is slow, not broken";
  EXPECT_EQ(rts.attr.sq_psn, 0xabcdefu) << "24 bits";
  EXPECT_EQ(rts.mask & (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT), IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT);
}

// Two rails on rxe devices, each RoCE port with the GIDs the kernel makes: the MAC-derived
// link-local (v1, v2) and the IPv4-mapped address (v1, v2).
RdmaInventory twoRails(bool rail1Active) {
  RdmaInventory inv;
  inv.ports = {{"rxe_rail0", 1, true, "ACTIVE", IBV_MTU_1024, 0}, {"rxe_rail1", 1, rail1Active, rail1Active ? "ACTIVE" : "DOWN", IBV_MTU_1024, 0}};
  auto ll = [](uint8_t last) {
    std::array<uint8_t, 16> g{0xfe, 0x80};
    g[15] = last;
    return g;
  };
  for (int r = 0; r < 2; ++r) {
    std::string dev = "rxe_rail" + std::to_string(r);
    uint32_t ifx = 3 + r;
    std::string addr = "10.77." + std::to_string(r + 1) + ".1";
    inv.gids.push_back({dev, 1, 0, GidType::kRoceV1, ifx, ll(static_cast<uint8_t>(r))});
    inv.gids.push_back({dev, 1, 1, GidType::kRoceV2, ifx, ll(static_cast<uint8_t>(r))});
    inv.gids.push_back({dev, 1, 2, GidType::kRoceV1, ifx, ipv4MappedGid(ip(addr.c_str()))});
    inv.gids.push_back({dev, 1, 3, GidType::kRoceV2, ifx, ipv4MappedGid(ip(addr.c_str()))});
  }
  return inv;
}

TEST(VerbsRailMap, RailNicFindsItsDeviceAndRoceV2GidByIfindex) {
  RdmaInventory inv = twoRails(true);
  auto p = mapRail(inv, {"rail1", 4, ip("10.77.2.1")});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->device, "rxe_rail1");
  EXPECT_EQ(p->port, 1);
  EXPECT_EQ(p->gidIndex, 3);
  EXPECT_EQ(p->gidType, GidType::kRoceV2);
  EXPECT_EQ(gidString(p->gid), "::ffff:10.77.2.1");
  EXPECT_TRUE(p->active);
}

TEST(VerbsRailMap, PrefersTheNicsOwnAddressThenAnyMappedV4ThenGlobalV6) {
  RdmaInventory inv = twoRails(true);
  // A second address on rail0 listed first: the rail's own address still wins.
  inv.gids.insert(inv.gids.begin(), {"rxe_rail0", 1, 9, GidType::kRoceV2, 3, ipv4MappedGid(ip("192.168.9.9"))});
  auto own = mapRail(inv, {"rail0", 3, ip("10.77.1.1")});
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->gidIndex, 3);
  auto noAddr = mapRail(inv, {"rail0", 3, 0});
  ASSERT_TRUE(noAddr.ok());
  EXPECT_EQ(noAddr->gidIndex, 9) << "any IPv4-mapped RoCEv2 GID when the NIC's address is unknown";
  RdmaInventory v6;
  v6.ports = {{"mlx5_0", 1, true, "ACTIVE", IBV_MTU_4096, 0}};
  std::array<uint8_t, 16> global{0x20, 0x01, 0x0d, 0xb8};
  global[15] = 1;
  std::array<uint8_t, 16> linkLocal{0xfe, 0x80};
  v6.gids = {{"mlx5_0", 1, 0, GidType::kRoceV2, 7, linkLocal}, {"mlx5_0", 1, 1, GidType::kRoceV2, 7, global}};
  auto g = mapRail(v6, {"ens1", 7, ip("10.0.0.1")});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->gidIndex, 1) << "a global IPv6 GID, never the link-local one";
  EXPECT_EQ(g->activeMtu, IBV_MTU_4096);
}

TEST(VerbsRailMap, ForcedGidIndexTakesThatEntryOrNamesWhatIsThere) {
  RdmaInventory inv = twoRails(true);
  auto p = mapRail(inv, {"rail0", 3, ip("10.77.1.1")}, 2);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->gidIndex, 2);
  EXPECT_EQ(p->gidType, GidType::kRoceV1);
  auto missing = mapRail(inv, {"rail0", 3, ip("10.77.1.1")}, 7);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Errc::kNotFound);
  EXPECT_NE(missing.status().message().find("GID index 7 (RECCL_IB_GID_INDEX)"), std::string::npos);
  EXPECT_NE(missing.status().message().find("rxe_rail0/1 #3 ::ffff:10.77.1.1 RoCEv2"), std::string::npos)
      << missing.status().message();
}

TEST(VerbsRailMap, NicWithoutRdmaOrWithOnlyLinkLocalGidsIsNotMapped) {
  RdmaInventory inv = twoRails(true);
  auto none = mapRail(inv, {"eth0", 2, ip("10.77.0.1")});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("rail NIC eth0: no RDMA port with a RoCEv2 GID (no RDMA device is bound to it)"),
            std::string::npos)
      << none.status().message();
  inv.gids.erase(std::remove_if(inv.gids.begin(), inv.gids.end(), [](const GidRecord& r) { return r.index >= 2; }),
                 inv.gids.end());
  auto ll = mapRail(inv, {"rail0", 3, ip("10.77.1.1")});
  ASSERT_FALSE(ll.ok());
  EXPECT_NE(ll.status().message().find("it has: rxe_rail0/1 #0 fe80::"), std::string::npos) << ll.status().message();
}

TEST(VerbsTransportChoice, ModesParseCaseInsensitivelyAndBadOnesAreNamed) {
  EXPECT_EQ(parseTransportMode("auto").value(), TransportMode::kAuto);
  EXPECT_EQ(parseTransportMode("VERBS").value(), TransportMode::kVerbs);
  EXPECT_EQ(parseTransportMode("socket").value(), TransportMode::kSocket);
  auto bad = parseTransportMode("ib");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "RECCL_TRANSPORT=ib: expected auto, verbs or socket");
}

TEST(VerbsTransportChoice, VerbsOnlyWhereEveryRankHasAnActivePortOnEachRail) {
  const std::vector<RailNic> rails = {{"rail0", 3, ip("10.77.1.1")}, {"rail1", 4, ip("10.77.2.1")}};
  RankRdma up = railReadiness(0, twoRails(true), rails);
  EXPECT_TRUE(up.ready) << up.reason;
  RankRdma down = railReadiness(1, twoRails(false), rails);
  EXPECT_FALSE(down.ready);
  EXPECT_EQ(down.reason, "rail NIC rail1: rxe_rail1 port 1 is DOWN");
  RankRdma noRails = railReadiness(2, twoRails(true), {});
  EXPECT_FALSE(noRails.ready);

  std::vector<RankRdma> allUp = {up, up};
  allUp[1].rank = 1;
  EXPECT_TRUE(decideTransport(TransportMode::kAuto, allUp)->verbs);
  EXPECT_TRUE(decideTransport(TransportMode::kVerbs, allUp)->verbs);
  EXPECT_FALSE(decideTransport(TransportMode::kSocket, allUp)->verbs);

  std::vector<RankRdma> oneDown = {up, down};
  auto autoPick = decideTransport(TransportMode::kAuto, oneDown);
  ASSERT_TRUE(autoPick.ok());
  EXPECT_FALSE(autoPick->verbs);
  EXPECT_NE(autoPick->why.find("rank 1 has no RDMA on its rails: rail NIC rail1"), std::string::npos) << autoPick->why;
  auto forced = decideTransport(TransportMode::kVerbs, oneDown);
  ASSERT_FALSE(forced.ok());
  EXPECT_EQ(forced.status().code(), Errc::kUnsupported);
  EXPECT_NE(forced.status().message().find("RECCL_TRANSPORT=verbs: rank 1"), std::string::npos);
}

}  // namespace
