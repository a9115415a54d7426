// The table must line up with nccl-tests' columns (tools parse it by position) and the bus
// bandwidth must use nccl-tests' factors.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "bench_table.h"

namespace reccl::bench {
namespace {

std::vector<std::string> fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  std::string f;
  while (in >> f) out.push_back(f);
  return out;
}

TEST(BenchTable, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::kReduceScatter, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::kReduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::kSendRecv, 8), 1.0);
}

TEST(BenchTable, TimingFromBytesAndTime) {
  Timing t = makeTiming(Coll::kAllReduce, 64 << 20, 1000.0, 4, 0);
  EXPECT_NEAR(t.algBw, 67.108864, 1e-9);  // 1e9-byte GB/s like nccl-tests
  EXPECT_NEAR(t.busBw, 67.108864 * 1.5, 1e-9);
  EXPECT_EQ(makeTiming(Coll::kAllReduce, 8, 0.0, 2, 0).algBw, 0.0);
}

TEST(BenchTable, RowColumnsLineUpWithTheHeader) {
  Row r;
  r.coll = Coll::kAllReduce;
  r.bytes = 134217728;
  r.count = 33554432;
  r.type = recclFloat32;
  r.op = recclSum;
  r.root = -1;
  r.outOfPlace = makeTiming(r.coll, r.bytes, 1211.23, 2, 0);
  r.inPlace = makeTiming(r.coll, r.bytes, 1250.0, 2, 3);
  std::string line = formatRow(r);
  // nccl-tests' widths: size 12, count 12, type 8, redop 6, root 6, time 7, bw 6, wrong 5.
  EXPECT_EQ(line.substr(0, 12), "   134217728");
  EXPECT_EQ(line.substr(12, 14), "      33554432");
  auto f = fields(line);
  ASSERT_EQ(f.size(), 13u) << line;
  EXPECT_EQ(f[2], "float");
  EXPECT_EQ(f[3], "sum");
  EXPECT_EQ(f[4], "-1");
  EXPECT_EQ(f[5], "1211.2");  // >= 100 us: one decimal
  EXPECT_EQ(f[6], "110.81");
  EXPECT_EQ(f[8], "0");
  EXPECT_EQ(f[9], "1250.0");
  EXPECT_EQ(f[12], "3");
  // Each row is as wide as the header's column line.
  std::string header = formatColumnHeader();
  auto lines = std::vector<std::string>();
  std::istringstream hin(header);
  for (std::string l; std::getline(hin, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(fields(lines[2]), (std::vector<std::string>{"#", "size", "count", "type", "redop", "root", "time", "algbw",
                                                        "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"}));
  EXPECT_EQ(line.size() - 1, lines[2].size());
  EXPECT_NE(lines[1].find("out-of-place"), std::string::npos);
  Row small = r;
  small.bytes = 8;
  small.count = 2;
  small.outOfPlace = makeTiming(r.coll, 8, 12.5, 2, 0);
  EXPECT_EQ(fields(formatRow(small))[5], "12.50");  // < 100 us: two decimals
}

TEST(BenchTable, UncheckedAndMissingInPlaceShowNA) {
  Row r;
  r.coll = Coll::kAllToAll;
  r.bytes = 1024;
  r.count = 256;
  r.outOfPlace = makeTiming(r.coll, r.bytes, 123456.0, 2, -1);
  auto f = fields(formatRow(r));
  ASSERT_EQ(f.size(), 13u);
  EXPECT_EQ(f[3], "none");
  EXPECT_EQ(f[5], "123456");  // >= 10000 us: no decimals
  EXPECT_EQ(f[8], "N/A");
  EXPECT_EQ(f[9], "N/A");
  EXPECT_EQ(f[12], "N/A");
}

TEST(BenchTable, FooterSaysOkOrFailed) {
  EXPECT_NE(formatFooter(0, 1.25).find("# Out of bounds values : 0 OK"), std::string::npos);
  EXPECT_NE(formatFooter(0, 1.25).find("# Avg bus bandwidth    : 1.25"), std::string::npos);
  EXPECT_NE(formatFooter(7, 0).find("# Out of bounds values : 7 FAILED"), std::string::npos);
}

TEST(BenchTable, JsonRecordHasEveryColumn) {
  Row r;
  r.coll = Coll::kReduce;
  r.bytes = 8;
  r.count = 2;
  r.type = recclBfloat16;
  r.op = recclAvg;
  r.root = 1;
  r.outOfPlace = makeTiming(r.coll, 8, 10.0, 2, 0);
  auto j = rowJson(r);
  EXPECT_EQ(j["coll"], "reduce");
  EXPECT_EQ(j["type"], "bfloat16");
  EXPECT_EQ(j["redop"], "avg");
  EXPECT_EQ(j["root"], 1);
  EXPECT_EQ(j["size_bytes"], 8);
  EXPECT_EQ(j["out_of_place"]["wrong"], 0);
  r.outOfPlace.reset();
  EXPECT_TRUE(rowJson(r)["out_of_place"].is_null());
  EXPECT_EQ(fields(formatRow(r))[5], "N/A");
  EXPECT_NEAR(j["out_of_place"]["algbw_gbps"].get<double>(), 0.0008, 1e-12);
  EXPECT_TRUE(j["in_place"].is_null());
}

TEST(BenchTable, CollectiveNamesRoundTrip) {
  for (Coll c : kAllColls) EXPECT_EQ(parseColl(collName(c)), c);
  EXPECT_EQ(parseColl("all_reduce_perf"), Coll::kAllReduce);
  EXPECT_EQ(parseColl("reduce_scatter"), Coll::kReduceScatter);
  EXPECT_EQ(parseColl("alltoall_perf"), Coll::kAllToAll);
  EXPECT_EQ(parseColl("bcast"), Coll::kBroadcast);
  EXPECT_FALSE(parseColl("gather").has_value());
}

}  // namespace
}  // namespace reccl::bench
