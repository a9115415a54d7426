// RECCL_TRANSPORT as the communicator decides it from the rank table (core/comm_transport.h):
// rank 0's mode over every rank's RDMA report, the same answer on every rank.
#include <gtest/gtest.h>

#include "core/comm_transport.h"

namespace reccl {
namespace {

std::vector<core::RankInfo> table(uint8_t mode0, std::vector<bool> ready) {
  std::vector<core::RankInfo> t;
  for (size_t r = 0; r < ready.size(); ++r) {
    core::RankInfo i;
    i.rank = static_cast<int>(r);
    i.transport = r == 0 ? mode0 : core::kTransportAuto;
    i.rdmaReady = ready[r];
    if (!ready[r]) i.rdmaWhy = "rail NIC rail" + std::to_string(r) + ": rxe_rail" + std::to_string(r) + " port 1 is DOWN";
    t.push_back(i);
  }
  return t;
}

TEST(CclCommTransport, SocketModeNeverUsesVerbs) {
  auto c = core::chooseTransport(table(core::kTransportSocket, {true, true}));
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->verbs);
}

#if RECCL_HAVE_VERBS
TEST(CclCommTransport, AutoPicksVerbsOnlyWhenEveryRankIsReady) {
  auto all = core::chooseTransport(table(core::kTransportAuto, {true, true, true}));
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->verbs);
  auto one = core::chooseTransport(table(core::kTransportAuto, {true, false, true}));
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->verbs);
  EXPECT_NE(one->why.find("rank 1"), std::string::npos) << one->why;
  EXPECT_NE(one->why.find("rail1"), std::string::npos) << one->why;
}

TEST(CclCommTransport, VerbsModeFailsNamingTheRankAndRailThatLacksIt) {
  auto ok = core::chooseTransport(table(core::kTransportVerbs, {true, true}));
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->verbs);
  auto bad = core::chooseTransport(table(core::kTransportVerbs, {true, true, false}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::kUnsupported);
  EXPECT_NE(bad.status().message().find("rank 2"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("rail2"), std::string::npos) << bad.status().message();
}

TEST(CclCommTransport, RankZerosModeWinsSoEveryRankDecidesAlike) {
  // Rank 1 asks for sockets, rank 0 for auto: every rank applies rank 0's.
  auto t = table(core::kTransportAuto, {true, true});
  t[1].transport = core::kTransportSocket;
  for (int viewer = 0; viewer < 2; ++viewer) {
    auto c = core::chooseTransport(t);
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(c->verbs);
  }
}
#else
TEST(CclCommTransport, WithoutVerbsAutoIsSocketsAndVerbsIsAnError) {
  EXPECT_FALSE(core::chooseTransport(table(core::kTransportAuto, {false, false}))->verbs);
  EXPECT_FALSE(core::chooseTransport(table(core::kTransportVerbs, {false, false})).ok());
}
#endif

}  // namespace
}  // namespace reccl
