// recclCommInitRankScalable (NCCL's ncclCommInitRankScalable): the bootstrap spread over several
// roots (core/bootstrap.h). Ranks are threads. The roots' own counts show the load is spread:
// root 0 sends the table to its block and one leader per other block, each other root to its own
// block, never one root to every rank.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ccl_test_util.h"
#include "core/bootstrap.h"
#include "core/handshake.h"
#include "core/wire.h"
#include "reccl/reccl.h"
#include "reccl/reccl.hpp"

namespace reccl::test {
namespace {

// A rank's record as the bootstrap carries it (what Comm::init would make, less the NIC search).
Result<core::RankInfo> infoOf(int rank) {
  core::RankInfo i;
  i.rank = rank;
  i.hostId = "host-" + std::to_string(rank / 2);
  i.hostName = i.hostId;
  i.pid = 1000 + static_cast<uint32_t>(rank);
  i.dataPort = static_cast<uint16_t>(20000 + rank);
  i.chunkBytes = 4096;
  i.slots = 8;
  i.nchannels = 2;
  i.nics = {{"lo", htonl(INADDR_LOOPBACK)}};
  return i;
}

struct Roots {
  std::vector<std::shared_ptr<core::BootstrapRoot>> roots;
  std::vector<core::UniqueIdData> ids;
};

Roots startRoots(int n, int64_t deadlineMs) {
  Roots out;
  for (int k = 0; k < n; ++k) {
    core::BootstrapConfig cfg;
    cfg.addr = htonl(INADDR_LOOPBACK);
    cfg.jobId = 0x5ca1ab1e00ull + static_cast<uint64_t>(k);
    cfg.bootKey = core::randomKey();
    cfg.deadline = Deadline::afterMs(deadlineMs);
    transport::Endpoint ep;
    auto root = core::BootstrapRoot::start(cfg, &ep);
    EXPECT_TRUE(root.ok()) << root.status().message();
    if (!root.ok()) return out;
    out.roots.push_back(*root);
    out.ids.push_back({ep.addr, ep.port, cfg.jobId, cfg.bootKey});
  }
  return out;
}

// A rank of a block made by hand, to leave at a chosen moment: its hello and its record sent to
// the block's root; the connection closes with the object.
struct HandMadeRank {
  UniqueFd fd;
  core::ByteIo io;
  HandMadeRank(const core::UniqueIdData& id, int rank, int n, int nroots, int index)
      : fd(connect(id)), io(core::socketIo(fd.get(), Deadline::afterMs(8000))) {
    core::Hello h;
    h.kind = core::HelloKind::kBootstrapBlock;
    h.jobId = id.jobId;
    h.srcRank = rank;
    h.dstRank = -1;
    h.nranks = n;
    h.channel = static_cast<uint32_t>(nroots);
    h.epoch = static_cast<uint32_t>(index);
    auto block = core::encodeRankTable({infoOf(rank).value()});
    std::vector<std::byte> then(4 + block.size());
    const auto len = static_cast<uint32_t>(block.size());
    std::memcpy(then.data(), &len, 4);
    std::memcpy(then.data() + 4, block.data(), block.size());
    EXPECT_TRUE(core::sendAuthHello(io, h, id.bootKey, core::AuthPurpose::kBootstrap, then).ok());
  }
  static UniqueFd connect(const core::UniqueIdData& id) {
    auto fd = transport::connectTcp(transport::Endpoint{id.addr, id.port}, 0, "", Deadline::afterMs(5000));
    EXPECT_TRUE(fd.ok()) << fd.status().message();
    return fd.ok() ? std::move(fd).value() : UniqueFd();
  }
};

// Every rank's exchange at once, each rank with the ids `idsOf` gives it.
std::vector<Result<core::BootstrapResult>> exchange(int n, const std::function<std::vector<core::UniqueIdData>(int)>& idsOf,
                                                    int64_t deadlineMs) {
  std::vector<Result<core::BootstrapResult>> got(n, Status(Errc::kInternal, "not run"));
  std::vector<std::thread> ts;
  for (int rank = 0; rank < n; ++rank)
    ts.emplace_back([&, rank] {
      got[rank] = core::bootstrapExchange(idsOf(rank), rank, n, [rank](uint32_t) { return infoOf(rank); },
                                          Deadline::afterMs(deadlineMs));
    });
  for (auto& t : ts) t.join();
  return got;
}

// 7 ranks over 3 roots: blocks [0, 2), [2, 4), [4, 7). Every rank gets the same table and
// secret; root 0 sends 2 + 2 tables, root 1 one block (to rank 2) and 1 table (rank 3), root 2
// one block and 2 tables.
TEST(ScalableInit, RootsServeTheirBlocksAndLeadersCarryTheRest) {
  const int n = 7, nroots = 3;
  Roots r = startRoots(nroots, 20000);
  ASSERT_EQ(static_cast<int>(r.ids.size()), nroots);
  auto got = exchange(n, [&](int) { return r.ids; }, 20000);
  for (int rank = 0; rank < n; ++rank) {
    ASSERT_TRUE(got[rank].ok()) << "rank " << rank << ": " << got[rank].status().message();
    ASSERT_EQ(got[rank]->table.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(got[rank]->table[i].rank, i);
      EXPECT_EQ(got[rank]->table[i].dataPort, 20000 + i) << "rank " << rank << "'s table, rank " << i;
    }
    EXPECT_EQ(got[rank]->comm.key, got[0]->comm.key) << "rank " << rank;
    EXPECT_EQ(got[rank]->comm.commId, got[0]->comm.commId) << "rank " << rank;
  }
  EXPECT_FALSE(core::isZeroKey(got[0]->comm.key));
  EXPECT_EQ(r.roots[0]->tablesSent(), 4);
  EXPECT_EQ(r.roots[0]->blocksSent(), 0);
  EXPECT_EQ(r.roots[1]->tablesSent(), 1);
  EXPECT_EQ(r.roots[1]->blocksSent(), 1);
  EXPECT_EQ(r.roots[2]->tablesSent(), 2);
  EXPECT_EQ(r.roots[2]->blocksSent(), 1);
}

// A rank that passes the ids in another order reaches a root that serves another block: refused
// with a message naming the ids, and the bootstrap fails for everyone (no rank gets a table),
// within the deadline.
TEST(ScalableInit, IdsInAnotherOrderAreRefusedByName) {
  const int n = 4, nroots = 2;
  Roots r = startRoots(nroots, 3000);
  ASSERT_EQ(static_cast<int>(r.ids.size()), nroots);
  auto got = exchange(
      n,
      [&](int rank) {
        std::vector<core::UniqueIdData> ids = r.ids;
        if (rank == 1) std::swap(ids[0], ids[1]);
        return ids;
      },
      4000);
  int named = 0;
  for (int rank = 0; rank < n; ++rank) {
    EXPECT_FALSE(got[rank].ok()) << "rank " << rank << " formed a communicator";
    if (!got[rank].ok() && got[rank].status().message().find("unique ids") != std::string::npos) ++named;
  }
  EXPECT_GE(named, 1) << got[1].status().message();
}

// A block's leader that dies once it holds its block (here: a hand-made rank 2 that takes the
// block from root 1 and hangs up) fails the rest of its block at once, naming the leader, not at
// the bootstrap deadline.
TEST(ScalableInit, ALeaderThatLeavesFailsItsBlockAtOnce) {
  const int n = 4, nroots = 2;
  Roots r = startRoots(nroots, 8000);
  ASSERT_EQ(static_cast<int>(r.ids.size()), nroots);
  std::thread leader([&] {
    HandMadeRank two(r.ids[1], 2, n, nroots, 1);
    std::array<std::byte, core::kRootFrameHeaderBytes> hb;
    EXPECT_TRUE(two.io.recv(hb).ok());  // its block: now it leaves
  });
  const auto t0 = std::chrono::steady_clock::now();
  Result<core::BootstrapResult> rank3 = core::bootstrapExchange(r.ids, 3, n, [](uint32_t) { return infoOf(3); },
                                                               Deadline::afterMs(8000));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  leader.join();
  ASSERT_FALSE(rank3.ok());
  EXPECT_NE(rank3.status().message().find("leader of this root's block (rank 2) left"), std::string::npos)
      << rank3.status().message();
  EXPECT_LT(s, 4.0) << "rank 3 waited for the deadline";
}

// The other way round: a block's member that leaves once its block went to the leader fails the
// block, and the leader, back from root 0 with the table, is told so by its root rather than
// going on with a communicator whose rank 3 is gone. Rank 1 comes only once rank 3 left, so
// the leader is held at root 0 meanwhile.
TEST(ScalableInit, ALeaderHearsItsBlockFailedWhileItWasAtRootZero) {
  const int n = 4, nroots = 2;
  Roots r = startRoots(nroots, 8000);
  ASSERT_EQ(static_cast<int>(r.ids.size()), nroots);
  auto three = std::make_unique<HandMadeRank>(r.ids[1], 3, n, nroots, 1);
  std::vector<Result<core::BootstrapResult>> got(3, Status(Errc::kInternal, "not run"));
  auto rank = [&](int k) {
    return std::thread([&, k] {
      got[k] = core::bootstrapExchange(r.ids, k, n, [k](uint32_t) { return infoOf(k); }, Deadline::afterMs(8000));
    });
  };
  std::thread zero = rank(0), two = rank(2);
  for (int i = 0; i < 500 && r.roots[1]->blocksSent() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(r.roots[1]->blocksSent(), 1);
  three.reset();  // rank 3 leaves: its block is on its way to root 0
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::thread one = rank(1);
  for (auto* t : {&zero, &one, &two}) t->join();
  EXPECT_TRUE(got[0].ok()) << got[0].status().message();  // root 0's ranks formed (rank 3 fails them later)
  EXPECT_TRUE(got[1].ok()) << got[1].status().message();
  ASSERT_FALSE(got[2].ok()) << "the leader went on with a block that failed";
  EXPECT_NE(got[2].status().message().find("rank 3 left after this root's block went to its leader"), std::string::npos)
      << got[2].status().message();
}

// The C API (odd ranks through the C++ layer): ranks as threads, every block layout from one
// root to a root per rank; the communicator's allreduce is exact.
TEST(ScalableInit, TheCommunicatorIsOneWhateverTheRootCount) {
  ScopedEnv shm("RECCL_SHM_DISABLE", "1");
  for (auto [n, nId] : std::vector<std::pair<int, int>>{{5, 2}, {5, 3}, {4, 4}, {3, 1}}) {
    SCOPED_TRACE(std::to_string(n) + " ranks, " + std::to_string(nId) + " roots");
    std::vector<recclUniqueId> ids(nId);
    for (auto& id : ids) ASSERT_EQ(recclGetUniqueId(&id), recclSuccess);
    std::vector<recclComm_t> comms(n, nullptr);
    std::vector<reccl::Communicator> owned(n);  // the odd ranks' handles
    std::vector<recclResult_t> rcs(n, recclInternalError);
    std::vector<std::string> errs(n);
    std::vector<std::thread> ts;
    for (int rank = 0; rank < n; ++rank)
      ts.emplace_back([&, rank] {
        recclConfig_t cfg = RECCL_CONFIG_INITIALIZER;
        std::vector<recclUniqueId> mine = ids;
        if (rank % 2 == 0) {
          rcs[rank] = recclCommInitRankScalable(&comms[rank], n, rank, nId, mine.data(), &cfg);
        } else {  // the C++ layer's spelling
          rcs[rank] = reccl::Communicator::init(&owned[rank], n, std::span<recclUniqueId>(mine), rank, &cfg);
          comms[rank] = owned[rank].get();
        }
        if (rcs[rank] != recclSuccess) {
          errs[rank] = recclGetLastError(nullptr);
          return;
        }
        int count = 0, me = -1;
        recclCommCount(comms[rank], &count);
        recclCommUserRank(comms[rank], &me);
        std::vector<int32_t> v(1000, rank + 1);
        rcs[rank] = recclAllReduce(v.data(), v.data(), v.size(), recclInt32, recclSum, comms[rank], nullptr);
        if (rcs[rank] == recclSuccess && (count != n || me != rank || v[999] != n * (n + 1) / 2)) {
          rcs[rank] = recclInternalError;
          errs[rank] = "count " + std::to_string(count) + ", rank " + std::to_string(me) + ", sum " +
                       std::to_string(v[999]);
        }
      });
    for (auto& t : ts) t.join();
    for (int rank = 0; rank < n; ++rank) EXPECT_EQ(rcs[rank], recclSuccess) << "rank " << rank << ": " << errs[rank];
    ts.clear();
    for (int rank = 0; rank < n; ++rank)
      ts.emplace_back([&, rank] {
        if (owned[rank]) owned[rank] = reccl::Communicator();
        else if (comms[rank]) recclCommDestroy(comms[rank]);
      });
    for (auto& t : ts) t.join();
  }
}

// What a root says of the ranks that kept it waiting (whoIsMissing, which a timed-out rank of its
// process adds to its error), once its thread has taken in what the ranks sent.
std::string missingOnceSettled(const core::BootstrapRoot& root, const std::string& want) {
  std::string got;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       (got = root.whoIsMissing()) != want && std::chrono::steady_clock::now() < end;)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return got;
}

// 6 ranks over 2 roots, blocks [0, 3) and [3, 6): root 0 misses rank 1 of its own block and the
// leader that would bring the other; root 1 misses rank 4.
TEST(ScalableInit, ARootNamesTheRanksAndTheLeadersThatNeverCame) {
  Roots r = startRoots(2, 30000);
  ASSERT_EQ(r.roots.size(), 2u);
  HandMadeRank r0(r.ids[0], 0, 6, 2, 0), r2(r.ids[0], 2, 6, 2, 0);
  HandMadeRank r3(r.ids[1], 3, 6, 2, 1), r5(r.ids[1], 5, 6, 2, 1);
  const std::string zero = "gathering 6 ranks, never reached by rank 1, nor by the leader (rank 3) bringing ranks 3-5";
  const std::string one = "gathering 3 ranks, never reached by rank 4";
  EXPECT_EQ(missingOnceSettled(*r.roots[0], zero), zero);
  EXPECT_EQ(missingOnceSettled(*r.roots[1], one), one);
  for (auto& root : r.roots) root->stop();
}

// One root of 40 ranks, the even ones there: 20 gaps, the first 16 named. Then of 2 ranks, one
// that came and left is named as such (not as missing) once the other came.
TEST(ScalableInit, ARootNamesManyGapsShortAndRanksThatLeftApart) {
  {
    Roots r = startRoots(1, 30000);
    ASSERT_EQ(r.roots.size(), 1u);
    std::vector<std::unique_ptr<HandMadeRank>> ranks;
    for (int k = 0; k < 40; k += 2) ranks.push_back(std::make_unique<HandMadeRank>(r.ids[0], k, 40, 1, 0));
    const std::string want =
        "gathering 40 ranks, never reached by ranks 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31 and 4 more";
    EXPECT_EQ(missingOnceSettled(*r.roots[0], want), want);
    r.roots[0]->stop();
  }
  Roots r = startRoots(1, 30000);
  ASSERT_EQ(r.roots.size(), 1u);
  auto first = std::make_unique<HandMadeRank>(r.ids[0], 0, 2, 1, 0);
  EXPECT_EQ(missingOnceSettled(*r.roots[0], "gathering 2 ranks, never reached by rank 1"),
            "gathering 2 ranks, never reached by rank 1");
  first.reset();  // rank 0 leaves
  HandMadeRank second(r.ids[0], 1, 2, 1, 0);
  const std::string want = "gathering 2 ranks, every rank reached it; left before the table went out: rank 0";
  EXPECT_EQ(missingOnceSettled(*r.roots[0], want), want);
  r.roots[0]->stop();
}

TEST(ScalableInit, BadArgumentsAreRefusedByName) {
  recclUniqueId ids[2];
  ASSERT_EQ(recclGetUniqueId(&ids[0]), recclSuccess);
  recclComm_t c = reinterpret_cast<recclComm_t>(0x1);
  auto refused = [&](recclResult_t rc, const char* what) {
    EXPECT_EQ(rc, recclInvalidArgument) << what;
    EXPECT_NE(std::string(recclGetLastError(nullptr)).find(what), std::string::npos) << recclGetLastError(nullptr);
    EXPECT_EQ(c, nullptr) << what;
    c = reinterpret_cast<recclComm_t>(0x1);
  };
  refused(recclCommInitRankScalable(&c, 2, 0, 0, ids, nullptr), "nId: 0");
  refused(recclCommInitRankScalable(&c, 2, 0, 3, ids, nullptr), "nId: 3");
  refused(recclCommInitRankScalable(&c, 2, 0, 2, nullptr, nullptr), "commIds: null");
  ids[1] = ids[0];
  refused(recclCommInitRankScalable(&c, 2, 0, 2, ids, nullptr), "commIds[0] and commIds[1] name one root");
  std::fill(std::begin(ids[1].internal), std::end(ids[1].internal), 0x33);
  refused(recclCommInitRankScalable(&c, 2, 0, 2, ids, nullptr), "commIds[1]");
  refused(recclCommInitRankScalable(&c, 2, 2, 1, ids, nullptr), "rank: 2");
  EXPECT_EQ(recclCommInitRankScalable(nullptr, 2, 0, 1, ids, nullptr), recclInvalidArgument);
}

}  // namespace
}  // namespace reccl::test
