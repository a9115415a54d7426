// reccl-bench against nccl-tests' own conventions: its output read by a reader of nccl-tests'
// format (nccl_tests_output.py, also shown reading a sample laid out as nccl-tests prints), the
// flags people pass by habit, -J JSON with nccl-tests' keys, and the command lines of
// nccl-tests' README run unchanged against a link named all_reduce_perf.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_child.h"
#include "temp_dir_test.h"

namespace {

using reccl::benchtest::Child;
using reccl::benchtest::slurp;
namespace fs = std::filesystem;

class NcclTestsCompat : public reccl::benchtest::TempDirTest {
 protected:
  NcclTestsCompat() : TempDirTest("reccl-nccl-compat-") {}

  // Runs argv (stdout and stderr to `file` in the test's folder); its exit code.
  int run(std::vector<std::string> argv, const std::string& file, std::vector<std::string> env = {},
          int seconds = 240) {
    Child c(argv, env, dir_ / file);
    return c.wait(std::chrono::seconds(seconds));
  }
  int bench(std::vector<std::string> args, const std::string& file = "out.txt", std::vector<std::string> env = {}) {
    args.insert(args.begin(), RECCL_BENCH_PATH);
    return run(args, file, env);
  }
  // nccl_tests_output.py's reading of a file; fails the test when it refuses it.
  nlohmann::json read(const std::string& file) {
    int rc = run({"/usr/bin/python3", NCCL_TESTS_OUTPUT_PY, (dir_ / file).string()}, file + ".parsed", {}, 60);
    EXPECT_EQ(rc, 0) << slurp(dir_ / (file + ".parsed"));
    if (rc != 0) return nlohmann::json::object();
    return nlohmann::json::parse(slurp(dir_ / (file + ".parsed")));
  }
};

TEST_F(NcclTestsCompat, TheReaderReadsNcclTestsOwnLayout) {
  fs::copy_file(NCCL_TESTS_SAMPLE, dir_ / "sample.txt");
  auto j = read("sample.txt");
  ASSERT_EQ(j["rows"].size(), 25u);
  EXPECT_EQ(j["devices"].size(), 8u);
  EXPECT_EQ(j["run"]["ngpus"], 8);
  EXPECT_EQ(j["rows"][24]["size"], 134217728);
  EXPECT_EQ(j["rows"][24]["count"], 33554432);
  EXPECT_DOUBLE_EQ(j["rows"][24]["in_place"]["busbw"].get<double>(), 225.86);
  EXPECT_TRUE(j["out_of_bounds_ok"].get<bool>());
  EXPECT_TRUE(j["concluded"].get<bool>());
  // And refuses what is not that layout: text in a number's place.
  std::string bad = slurp(dir_ / "sample.txt");
  bad.replace(bad.find("   18.00"), 8, "     N/A");
  std::ofstream(dir_ / "bad.txt") << bad;
  EXPECT_EQ(run({"/usr/bin/python3", NCCL_TESTS_OUTPUT_PY, (dir_ / "bad.txt").string()}, "bad.parsed"), 1);
  EXPECT_NE(slurp(dir_ / "bad.parsed").find("time 'N/A' is not a number"), std::string::npos) << slurp(dir_ / "bad.parsed");
}

struct Flags {
  const char* name;
  std::vector<std::string> args;
  size_t rows;  // rows the run prints
};
void PrintTo(const Flags& f, std::ostream* os) { *os << f.name; }

class ReadsAsNcclTests : public NcclTestsCompat, public ::testing::WithParamInterface<Flags> {};

TEST_P(ReadsAsNcclTests, EveryRowAndTheFooter) {
  std::vector<std::string> args = GetParam().args;
  args.insert(args.end(), {"--json", (dir_ / "r.json").string()});
  ASSERT_EQ(bench(args), 0) << slurp(dir_ / "out.txt");
  auto j = read("out.txt");
  ASSERT_EQ(j["rows"].size(), GetParam().rows) << slurp(dir_ / "out.txt");
  auto mine = nlohmann::json::parse(slurp(dir_ / "r.json"));
  ASSERT_EQ(mine["rows"].size(), GetParam().rows);
  for (size_t i = 0; i < j["rows"].size(); ++i) {
    const auto& row = j["rows"][i];
    EXPECT_EQ(row["size"], mine["rows"][i]["size_bytes"]) << i;
    EXPECT_EQ(row["count"], mine["rows"][i]["count"]) << i;
    for (const char* part : {"out_of_place", "in_place"}) {
      if (mine["rows"][i][part].is_null()) {
        EXPECT_TRUE(row[part].is_null()) << i << " " << part;  // blank, not text
        continue;
      }
      ASSERT_TRUE(row[part].is_object()) << i << " " << part;
      const std::string timeColumn = j["columns"][0];  // time, or cputime with -C 1
      EXPECT_GT(row[part][timeColumn].get<double>(), 0.0) << i;
      EXPECT_EQ(row[part]["wrong"], mine["rows"][i][part]["wrong"]) << i;  // 0, or null when unchecked
    }
  }
  EXPECT_EQ(j["out_of_bounds"], 0);
  EXPECT_TRUE(j["concluded"].get<bool>());
  EXPECT_FALSE(j["run"].is_null());
}

INSTANTIATE_TEST_SUITE_P(
    Flags, ReadsAsNcclTests,
    ::testing::Values(
        Flags{"Threads", {"-t", "2", "-b", "1K", "-e", "64K", "-f", "4", "-n", "3", "-w", "1"}, 4},
        // Every collective: alltoall and sendrecv have no in-place part; -c 0 prints N/A for #wrong.
        Flags{"AllUnchecked", {"-g", "3", "--coll", "all", "-b", "96", "-e", "96", "-n", "2", "-w", "0", "-c", "0"}, 9},
        Flags{"TimingFlags",
              {"-t", "2", "-b", "4K", "-e", "16K", "-f", "2", "-n", "4", "-C", "1", "-S", "1", "-I", "1", "-K", "1",
               "-a", "3", "-m", "2", "-z", "3", "-u", "3", "-N", "2", "-c", "2"},
              6}),
    [](const auto& tpi) { return std::string(tpi.param.name); });

TEST_F(NcclTestsCompat, JsonHasNcclTestsKeysAndKinds) {
  const std::string out = (dir_ / "nt.json").string();
  ASSERT_EQ(bench({"-t", "2", "-b", "1K", "-e", "2K", "-f", "2", "-n", "2", "-J", out, "-I", "1"}, "out.txt",
                  {"RECCL_JOB_SECRET=do-not-print-me"}),
            0)
      << slurp(dir_ / "out.txt");
  EXPECT_NE(slurp(dir_ / "out.txt").find("# Wrote JSON output to " + out), std::string::npos);
  auto j = nlohmann::ordered_json::parse(slurp(out));
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"version", "start_time", "args", "env", "nccl_version", "reccl_version",
                                            "config", "results", "out_of_bounds", "average_bus_bandwidth", "errors",
                                            "end_time"}));
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["config"]["nthreads"], 2);
  EXPECT_EQ(j["config"]["iterations"], 2);
  EXPECT_EQ(j["config"]["step_factor"], 2.0);
  EXPECT_EQ(j["config"]["per_iter_timing"], "true");  // nccl-tests writes booleans as strings
  ASSERT_EQ(j["config"]["devices"].size(), 2u);
  EXPECT_EQ(j["config"]["devices"][1]["rank"], 1);
  ASSERT_EQ(j["results"].size(), 2u);
  const auto& r = j["results"][0];
  EXPECT_EQ(r["size"], 1024);
  EXPECT_EQ(r["count"], 256);
  EXPECT_EQ(r["type"], "float");
  EXPECT_EQ(r["redop"], "sum");
  EXPECT_EQ(r["root"], "    -1");
  for (const char* part : {"out_of_place", "in_place"}) {
    EXPECT_GT(r[part]["time"].get<double>(), 0.0);
    EXPECT_TRUE(r[part]["alg_bw"].is_number());
    EXPECT_TRUE(r[part]["bus_bw"].is_number());
    EXPECT_EQ(r[part]["nwrong"], 0.0);
  }
  EXPECT_EQ(r["out_of_place_per_iter"]["times_us"].size(), 2u);
  EXPECT_EQ(r["actual_iterations"], 2);
  EXPECT_EQ(j["out_of_bounds"]["okay"], "true");
  EXPECT_EQ(j["average_bus_bandwidth"]["okay"], "unchecked");
  EXPECT_TRUE(j["errors"].empty());
  const std::string env = j["env"].dump();
  EXPECT_NE(env.find("RECCL_JOB_SECRET=<hidden>"), std::string::npos);
  EXPECT_EQ(env.find("do-not-print-me"), std::string::npos);
  // nccl-tests never overwrites: a second run writes nt.json.0.
  ASSERT_EQ(bench({"-t", "2", "-b", "1K", "-e", "1K", "-n", "1", "-J", out}, "out2.txt"), 0) << slurp(dir_ / "out2.txt");
  EXPECT_TRUE(fs::exists(out + ".0"));
}

TEST_F(NcclTestsCompat, FlagsPassedByHabitAreAcceptedAndGpuOnlyOnesNoted) {
  ASSERT_EQ(bench({"-g", "2", "-a", "1", "-m", "2", "-N", "1", "-p", "1", "-T", "60", "-G", "4", "-C", "0", "-J",
                   (dir_ / "h.json").string(), "-R", "1", "-u", "1", "-M", "1", "-I", "1", "-b", "1K", "-e", "8K",
                   "-f", "2", "-n", "2", "-y", "1", "-x", "0", "-D", "0", "-V", "16"}),
            0)
      << slurp(dir_ / "out.txt");
  const std::string out = slurp(dir_ / "out.txt");
  for (const char* note : {"-G,--cudagraph 4", "-M,--memory 1", "-y,--stream_null 1", "-V,--device_cta_count 16"})
    EXPECT_NE(out.find(std::string("reccl-bench: ") + note), std::string::npos) << note << "\n" << out;
  // -R 1 registers the buffers (recclCommRegister), as nccl-tests' does: no note, a header line.
  EXPECT_EQ(out.find("--local_register"), std::string::npos) << out;
  EXPECT_NE(out.find("# Buffers registered with each communicator"), std::string::npos) << out;
  EXPECT_EQ(out.find("--cta_policy 0"), std::string::npos) << "a flag left at 0 is not noted";
  // -R 2: symmetric windows on every rank (recclCommWindowRegister), checked results, ended alike.
  ASSERT_EQ(bench({"-g", "3", "-R", "2", "-b", "1K", "-e", "64K", "-f", "8", "-n", "2"}, "windows.txt"), 0)
      << slurp(dir_ / "windows.txt");
  const std::string win = slurp(dir_ / "windows.txt");
  EXPECT_NE(win.find("# Buffers registered as symmetric windows"), std::string::npos) << win;
  EXPECT_NE(win.find("# Out of bounds values : 0 OK"), std::string::npos) << win;
  EXPECT_EQ(bench({"-a", "4"}, "usage.txt"), 64);
  EXPECT_NE(slurp(dir_ / "usage.txt").find("-a/--average"), std::string::npos);
  EXPECT_EQ(bench({"-d", "f8e4m3"}, "usage.txt"), 64);
  EXPECT_NE(slurp(dir_ / "usage.txt").find("not a reccl type"), std::string::npos);
}

// nccl-tests' README, unchanged but for where the binary lies: build/all_reduce_perf is a link to
// reccl-bench, whose name picks the collective.
TEST_F(NcclTestsCompat, ReadmeSingleNodeLineRunsUnchanged) {
  fs::create_directories(dir_ / "build");
  fs::create_symlink(RECCL_BENCH_PATH, dir_ / "build" / "all_reduce_perf");
  const std::string prog = (dir_ / "build" / "all_reduce_perf").string();
  ASSERT_EQ(run({prog, "-b", "8", "-e", "128M", "-f", "2", "-g", "8"}, "readme.txt", {}, 600), 0)
      << slurp(dir_ / "readme.txt");
  auto j = read("readme.txt");
  ASSERT_EQ(j["rows"].size(), 25u);  // 8 B .. 128 MiB, doubling
  EXPECT_EQ(j["devices"].size(), 8u);
  EXPECT_EQ(j["rows"][24]["size"], 134217728);
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["type"], "float");
    EXPECT_EQ(row["out_of_place"]["wrong"], 0);
    EXPECT_EQ(row["in_place"]["wrong"], 0);
  }
  EXPECT_NE(slurp(dir_ / "readme.txt").find("# Collective test starting: " + prog), std::string::npos);
}

}  // namespace
