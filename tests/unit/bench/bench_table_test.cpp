// The table must line up with nccl-tests' columns (tools parse it by position), format numbers as
// it does (never text in a number's place), and use nccl-tests' bus-bandwidth factors.
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
  // nccl-tests' widths: size 12, count 12, type 8, redop 6, root 6, time 7, bw 6, wrong 6.
  EXPECT_EQ(line.substr(0, 12), "   134217728");
  EXPECT_EQ(line.substr(12, 14), "      33554432");
  EXPECT_EQ(line.substr(line.size() - 9, 8), "       3");
  auto f = fields(line);
  ASSERT_EQ(f.size(), 13u) << line;
  EXPECT_EQ(f[2], "float");
  EXPECT_EQ(f[3], "sum");
  EXPECT_EQ(f[4], "-1");
  EXPECT_EQ(f[5], "1211.23");  // fits 7 wide with two decimals
  EXPECT_EQ(f[6], "110.81");
  EXPECT_EQ(f[8], "0");
  EXPECT_EQ(f[9], "1250.00");
  EXPECT_EQ(f[12], "3");
  // Each row is as wide as the header's column line.
  std::string header = formatColumnHeader();
  auto lines = std::vector<std::string>();
  std::istringstream hin(header);
  for (std::string l; std::getline(hin, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(fields(lines[2]), (std::vector<std::string>{"#", "size", "count", "type", "redop", "root", "time", "algbw",
                                                        "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"}));
  EXPECT_EQ(line.size() - 1 + 1, lines[2].size());  // the header ends in nccl-tests' trailing space
  EXPECT_NE(lines[1].find("out-of-place"), std::string::npos);
  Row small = r;
  small.bytes = 8;
  small.count = 2;
  small.outOfPlace = makeTiming(r.coll, 8, 12.5, 2, 0);
  EXPECT_EQ(fields(formatRow(small))[5], "12.50");
}

struct Cell {
  double v;
  int width;
  const char* text;
};

class NumberCell : public ::testing::TestWithParam<Cell> {};

TEST_P(NumberCell, DropsDecimalsThenGoesToExponentNeverWider) {
  EXPECT_EQ(numberCell(GetParam().v, GetParam().width), GetParam().text);
}

INSTANTIATE_TEST_SUITE_P(Table, NumberCell,
                         ::testing::Values(Cell{1.234, 6, "  1.23"}, Cell{123.456, 6, "123.46"},
                                           Cell{1234.5, 6, "1234.5"}, Cell{123456.7, 6, "123457"},
                                           Cell{1234567.0, 6, " 1e+06"}, Cell{1211.23, 7, "1211.23"},
                                           Cell{123456.0, 7, " 123456"}, Cell{12345678.9, 7, "1.2e+07"},
                                           Cell{0.0, 6, "  0.00"}));

TEST(BenchTable, UncheckedSaysNAAndAMissingPartIsBlank) {
  Row r;
  r.coll = Coll::kAllToAll;
  r.bytes = 1024;
  r.count = 256;
  r.outOfPlace = makeTiming(r.coll, r.bytes, 123456.0, 2, -1);
  const std::string line = formatRow(r);
  auto f = fields(line);
  ASSERT_EQ(f.size(), 9u) << line;
  EXPECT_EQ(f[3], "none");
  EXPECT_EQ(f[5], "123456");
  EXPECT_EQ(f[8], "N/A");  // #wrong of an unchecked row, as nccl-tests prints it
  std::istringstream hin(formatColumnHeader());
  std::vector<std::string> lines;
  for (std::string l; std::getline(hin, l);) lines.push_back(l);
  EXPECT_EQ(line.size() - 1 + 1, lines[2].size());  // the in-place columns are spaces, not text
}

TEST(BenchTable, PerIterationAndTimestampColumnsLineUp) {
  TableStyle style{true, true, true};
  Row r;
  r.bytes = 4096;
  r.count = 1024;
  r.op = recclSum;
  r.outOfPlace = makeTiming(r.coll, r.bytes, 20.0, 2, 0);
  r.outOfPlace->perIter = iterStats({30, 10, 20, 40, 50}, 1);
  r.inPlace = r.outOfPlace;
  r.timestamp = "2026-01-02 03:04:05";
  std::istringstream hin(formatColumnHeader(style));
  std::vector<std::string> lines;
  for (std::string l; std::getline(hin, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u);
  auto h = fields(lines[2]);
  ASSERT_EQ(h.size(), 23u);
  EXPECT_EQ(h[1], "size");
  EXPECT_EQ(h[10], "i_min");
  EXPECT_EQ(h[22], "timestamp");
  EXPECT_EQ(fields(lines[1])[0], "#");
  const std::string line = formatRow(r, style);
  auto f = fields(line);
  ASSERT_EQ(f.size(), 23u) << line;  // 5 + 2 x 8 + a two-word timestamp
  EXPECT_EQ(f[9], "10.00");         // i_min of 10, 20, 40, 50 (30 skipped)
  EXPECT_EQ(f[10], "50.00");        // i_max
  EXPECT_EQ(f[21] + " " + f[22], "2026-01-02 03:04:05");
  EXPECT_EQ(line.size() - 1, lines[2].size() + 1);  // "%21s" under nccl-tests' " %19s" header
  auto cheap = formatColumnHeader(TableStyle{true, false, false});
  EXPECT_NE(cheap.find("cputime"), std::string::npos);
}

TEST(BenchTable, IterationStatisticsAreNcclTests) {
  IterStats s = iterStats({5, 1, 2, 3, 4}, 1);  // 5 skipped: 1, 2, 3, 4
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.timesUs.size(), 5u);  // the samples keep every iteration
  EXPECT_DOUBLE_EQ(s.minUs, 1);
  EXPECT_DOUBLE_EQ(s.maxUs, 4);
  EXPECT_DOUBLE_EQ(s.p50Us, 3);  // sorted[n / 2]
  EXPECT_DOUBLE_EQ(s.p95Us, 4);  // nearest rank
  EXPECT_DOUBLE_EQ(s.avgUs, 2.5);
  EXPECT_NEAR(s.stdevUs, 1.118034, 1e-6);  // population
  EXPECT_NEAR(s.cvPct, 44.72136, 1e-4);
}

TEST(BenchTable, FooterSaysOkOrFailed) {
  EXPECT_NE(formatFooter(0, 1.25, -1, "p").find("# Out of bounds values : 0 OK"), std::string::npos);
  EXPECT_NE(formatFooter(0, 1.25, -1, "p").find("# Avg bus bandwidth    : 1.25 \n"), std::string::npos);
  EXPECT_NE(formatFooter(7, 0, -1, "p").find("# Out of bounds values : 7 FAILED"), std::string::npos);
  EXPECT_NE(formatFooter(0, 1.25, -1, "all_reduce_perf").find("# Collective test concluded: all_reduce_perf\n#\n\n"),
            std::string::npos);
  // NCCL_TESTS_MIN_BW: 90 % of it must be reached.
  EXPECT_NE(formatFooter(0, 0.9, 1.0, "p").find("Avg bus bandwidth    : 0.9 OK"), std::string::npos);
  EXPECT_NE(formatFooter(0, 0.8, 1.0, "p").find("Avg bus bandwidth    : 0.8 FAILED"), std::string::npos);
  EXPECT_NE(formatFooter(0, 1, -1, "p", "rank 1: boom").find("# error: rank 1: boom\n"), std::string::npos);
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
  EXPECT_EQ(fields(formatRow(r)).size(), 5u);  // neither part: both blank
  EXPECT_NEAR(j["out_of_place"]["algbw_gbps"].get<double>(), 0.0008, 1e-12);
  EXPECT_TRUE(j["in_place"].is_null());
}

TEST(BenchTable, CollectiveNamesRoundTrip) {
  for (Coll c : kAllColls) EXPECT_EQ(parseColl(collName(c)), c);
  EXPECT_EQ(parseColl("all_reduce_perf"), Coll::kAllReduce);
  EXPECT_EQ(parseColl("reduce_scatter"), Coll::kReduceScatter);
  EXPECT_EQ(parseColl("alltoall_perf"), Coll::kAllToAll);
  EXPECT_EQ(parseColl("bcast"), Coll::kBroadcast);
  EXPECT_EQ(parseColl("gather_perf"), Coll::kGather);
  EXPECT_EQ(parseColl("scatter_perf"), Coll::kScatter);
  EXPECT_FALSE(parseColl("hypercube").has_value());
}

}  // namespace
}  // namespace reccl::bench
