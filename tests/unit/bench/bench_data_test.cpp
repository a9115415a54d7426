// The data check of reccl-bench against a plain in-memory execution of every collective (the
// reduction through reccl's kernels, in rank order and in reverse order): a correct result must
// count zero wrong elements for every type, op and rank count, and a single corrupted element,
// an untouched output or the wrong root must be caught.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "bench_data.h"
#include "reduce/reduce.h"

namespace reccl::bench {
namespace {

using Bytes = std::vector<unsigned char>;

// Every rank's receive buffer after the collective, computed directly from the send buffers.
std::vector<Bytes> execute(const DataSpec& d, size_t count, bool reverseOrder) {
  const int n = d.nranks;
  const size_t es = reduce::typeSize(d.type);
  std::vector<Shape> shapes;
  std::vector<Bytes> send, recv;
  for (int r = 0; r < n; ++r) {
    shapes.push_back(shapeFor(d.coll, count, n, r));
    send.emplace_back(shapes[r].sendCount * es);
    fillInput(d, r, shapes[r], send[r].data());
    recv.emplace_back(shapes[r].recvCount * es, 0xA5);
  }
  const size_t total = shapes[0].count;
  const size_t per = total / size_t(n);
  auto reduceAll = [&]() {
    Bytes acc = send[reverseOrder ? n - 1 : 0];
    reduce::ReduceFn fn = reduce::kernel(d.type, d.op);
    for (int k = 1; k < n; ++k) {
      int r = reverseOrder ? n - 1 - k : k;
      fn(acc.data(), acc.data(), send[r].data(), acc.size() / es);
    }
    if (d.op == recclAvg) reduce::finalizeAvg(acc.data(), acc.size() / es, d.type, n);
    return acc;
  };
  switch (d.coll) {
    case Coll::kAllReduce: {
      Bytes acc = reduceAll();
      for (int r = 0; r < n; ++r) recv[r] = acc;
      break;
    }
    case Coll::kReduce:
      recv[d.root] = reduceAll();
      break;
    case Coll::kReduceScatter: {
      Bytes acc = reduceAll();
      for (int r = 0; r < n; ++r) std::memcpy(recv[r].data(), acc.data() + r * per * es, per * es);
      break;
    }
    case Coll::kAllGather:
      for (int q = 0; q < n; ++q)
        for (int p = 0; p < n; ++p) std::memcpy(recv[q].data() + p * per * es, send[p].data(), per * es);
      break;
    case Coll::kBroadcast:
      for (int r = 0; r < n; ++r) recv[r] = send[d.root];
      break;
    case Coll::kAllToAll:
      for (int q = 0; q < n; ++q)
        for (int p = 0; p < n; ++p)
          std::memcpy(recv[q].data() + p * per * es, send[p].data() + q * per * es, per * es);
      break;
    case Coll::kSendRecv:
      for (int q = 0; q < n; ++q) recv[q] = send[(q - 1 + n) % n];
      break;
    case Coll::kGather:
      for (int p = 0; p < n; ++p) std::memcpy(recv[d.root].data() + p * per * es, send[p].data(), per * es);
      break;
    case Coll::kScatter:
      for (int q = 0; q < n; ++q) std::memcpy(recv[q].data(), send[d.root].data() + q * per * es, per * es);
      break;
  }
  return recv;
}

size_t wrongOn(const DataSpec& d, size_t count, int rank, const Bytes& recv) {
  return countWrong(d, rank, shapeFor(d.coll, count, d.nranks, rank), recv.data());
}

using Param = std::tuple<Coll, recclDataType_t>;
class BenchDataTest : public ::testing::TestWithParam<Param> {};

TEST_P(BenchDataTest, CorrectResultsPassAndCorruptionIsCaught) {
  auto [coll, type] = GetParam();
  const size_t es = reduce::typeSize(type);
  std::vector<recclRedOp_t> ops = collReduces(coll)
                                      ? std::vector<recclRedOp_t>{recclSum, recclProd, recclMax, recclMin, recclAvg}
                                      : std::vector<recclRedOp_t>{recclSum};
  for (int n : {1, 2, 3, 5, 8}) {
    for (recclRedOp_t op : ops) {
      for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1031)}) {
        DataSpec d{coll, type, op, n, n - 1};
        for (bool reverse : {false, true}) {
          auto recv = execute(d, count, reverse);
          for (int r = 0; r < n; ++r)
            ASSERT_EQ(wrongOn(d, count, r, recv[r]), 0u)
                << collName(coll) << " " << reduce::typeName(type) << " " << reduce::opName(op) << " n=" << n
                << " count=" << count << " rank " << r << (reverse ? " reverse order" : "");
        }
        auto recv = execute(d, count, false);
        const int victim = d.root;  // the one rank whose output is always defined
        if (recv[victim].empty()) continue;
        Bytes bad = recv[victim];
        size_t at = (bad.size() / es) / 2;
        for (size_t b = 0; b < es; ++b) bad[at * es + b] ^= 0x5A;
        EXPECT_EQ(wrongOn(d, count, victim, bad), 1u) << collName(coll) << " n=" << n << " count=" << count;
        Bytes untouched(bad.size(), 0xA5);
        EXPECT_GT(wrongOn(d, count, victim, untouched), 0u) << "an output never written must be caught";
      }
    }
  }
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(collName(std::get<0>(info.param))) + "_" + reduce::typeName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    AllCollectives, BenchDataTest,
    ::testing::Combine(::testing::ValuesIn(kAllColls),
                       ::testing::Values(recclInt8, recclUint8, recclInt32, recclUint32, recclInt64, recclUint64,
                                         recclFloat16, recclFloat32, recclFloat64, recclBfloat16)),
    paramName);

TEST(BenchData, BroadcastFromTheWrongRootIsCaught) {
  DataSpec d{Coll::kBroadcast, recclFloat32, recclSum, 4, 2};
  DataSpec other = d;
  other.root = 1;
  auto recv = execute(other, 1000, false);
  EXPECT_GT(wrongOn(d, 1000, 0, recv[0]), 900u);
}

TEST(BenchData, AllGatherWithSwappedBlocksIsCaught) {
  DataSpec d{Coll::kAllGather, recclInt32, recclSum, 3, 0};
  auto recv = execute(d, 300, false);
  Bytes swapped = recv[1];
  std::swap_ranges(swapped.begin(), swapped.begin() + 400, swapped.begin() + 400);
  EXPECT_GT(wrongOn(d, 300, 1, swapped), 150u);
}

TEST(BenchData, LargeFloatAllReduceIsExact) {
  DataSpec d{Coll::kAllReduce, recclBfloat16, recclSum, 8, 0};
  auto recv = execute(d, (1 << 20) + 3, true);
  EXPECT_EQ(wrongOn(d, (1 << 20) + 3, 5, recv[5]), 0u);
}

// The check works on blocks of elements: outputs over several blocks, each rank's reduce-scatter
// slice from its own offset, and wrong elements in a later block counted and located exactly.
TEST(BenchData, OutputsOverSeveralBlocksAreCheckedElementByElement) {
  for (recclRedOp_t op : {recclSum, recclAvg, recclMax}) {
    for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather}) {
      for (recclDataType_t type : {recclFloat32, recclInt64, recclFloat16}) {
        DataSpec d{coll, type, op, 3, 0};
        const size_t count = 3 * 2500 + 1;
        const size_t es = reduce::typeSize(type);
        auto recv = execute(d, count, true);
        for (int r = 0; r < d.nranks; ++r) {
          ASSERT_EQ(wrongOn(d, count, r, recv[r]), 0u) << collName(coll) << " " << reduce::typeName(type) << " "
                                                      << reduce::opName(op) << " rank " << r;
          Bytes bad = recv[r];
          const size_t elems = bad.size() / es;
          ASSERT_GT(elems, 2048u);
          for (size_t at : {size_t(2047), elems - 1}) bad[at * es] ^= 0x40;
          size_t first = 0;
          EXPECT_EQ(countWrong(d, r, shapeFor(coll, count, d.nranks, r), bad.data(), &first), 2u)
              << collName(coll) << " " << reduce::typeName(type) << " " << reduce::opName(op) << " rank " << r;
          EXPECT_EQ(first, 2047u);
        }
      }
    }
  }
}

TEST(BenchData, InputsDependOnRankAndIndex) {
  DataSpec d{Coll::kAllGather, recclFloat32, recclSum, 4, 0};
  int differ = 0;
  for (size_t i = 0; i < 100; ++i) differ += inputValue(d, 0, i) != inputValue(d, 1, i);
  EXPECT_GT(differ, 80);
}

}  // namespace
}  // namespace reccl::bench
