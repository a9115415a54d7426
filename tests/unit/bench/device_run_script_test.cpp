// bench/device/run.sh, the GPU machine's one prepared run, against a made-up carried build: shell
// programs named like the real ones that pass, skip, fail, hang or crash as each case asks, a ctest
// registry of their tests, and benches (the NCCL plugin check too) that write the JSON the script reads. No GPU is needed:
// what is checked is the script's own logic, which gets one chance on a lent GPU. A run passes
// only when every check passed; skips (no device), a kernel under the bar, a failed, hung or
// crashed test all make it fail and say which; without ctest the programs run directly; a TERM
// prints the table at once and leaves no test process behind; the table is always printed last.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench_child.h"
#include "temp_dir_test.h"

namespace {

using reccl::benchtest::Child;
using reccl::benchtest::slurp;
namespace fs = std::filesystem;

// The made-up tests, by the program that holds them, and the check (summary row) they feed.
struct FakeCase {
  const char* program;
  const char* name;
};
constexpr FakeCase kCases[] = {
    {"cuda_device_test", "DeviceKernels.EveryTypeAndOp"},
    {"cuda_device_test", "Gate.HoldsTheStream"},
    {"cuda_device_test", "StreamCollectives.AllReduce"},
    {"cuda_device_test", "IpcPipe.Echo"},
    {"cuda_railpull_test", "DeviceRailPull.BitExact"},
};

void writeExecutable(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
  fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
}

class DeviceRunScript : public reccl::benchtest::TempDirTest {
 protected:
  DeviceRunScript() : TempDirTest("reccl-devrun-") {}

  // Every case passes and the kernels make `ratio` of a copy's traffic unless told otherwise;
  // `outcome` per case: pass, skip, fail, hang or crash. `bench` for both benches: ok or nodevice.
  void makeCarry(const std::map<std::string, std::string>& outcome, double ratio, const std::string& bench = "ok") {
    carry_ = dir_ / "carry";
    fs::create_directories(carry_ / "bin");
    fs::create_directories(carry_ / "devlibs");
    fs::create_directories(carry_ / "outcome");
    // The build directory the cache names is the carry itself, so the script links nothing.
    std::ofstream(carry_ / "CMakeCache.txt") << "CMAKE_CACHEFILE_DIR:INTERNAL=" << carry_.string() << "\n";
    std::ofstream(carry_ / "reccl-commit.txt") << "0123abc\n";
    std::string ctest;
    for (const auto& c : kCases) {
      auto it = outcome.find(c.name);
      std::ofstream(carry_ / "outcome" / c.name) << (it == outcome.end() ? "pass" : it->second) << "\n";
      ctest += std::string("add_test(") + c.name + " \"" + (carry_ / "bin" / "one_case").string() + "\" " + c.name +
               ")\nset_tests_properties(" + c.name + " PROPERTIES LABELS device SKIP_RETURN_CODE 77 TIMEOUT 600)\n";
    }
    std::ofstream(carry_ / "CTestTestfile.cmake") << ctest;
    const std::string outcomes = (carry_ / "outcome").string();
    const std::string pids = (dir_ / "pids").string();
    // One case as ctest runs it: its exit says the outcome; a hang records its pid first, and
    // ends by itself after 40 s (past the step's 10 s) should this test be killed.
    writeExecutable(carry_ / "bin" / "one_case",
                    "#!/bin/bash\ncase $(cat '" + outcomes + "'/$1) in\n"
                    "  pass) exit 0 ;; skip) echo 'no CUDA device'; exit 77 ;;\n"
                    "  fail) echo 'expected 3, got 4'; exit 1 ;;\n"
                    "  hang) echo $$ >>'" + pids + "'; exec sleep 40 ;; crash) kill -SEGV $$ ;;\nesac\n");
    // A test program as run without ctest: gtest's lines for each of its cases.
    for (const char* program : {"cuda_device_test", "cuda_railpull_test"}) {
      std::string names;
      for (const auto& c : kCases)
        if (std::string(c.program) == program) names += std::string(" ") + c.name;
      writeExecutable(carry_ / "bin" / program,
                      "#!/bin/bash\nfor t in" + names + "; do\n  echo \"[ RUN      ] $t\"\n"
                      "  case $(cat '" + outcomes + "'/$t) in\n"
                      "    pass) echo \"[       OK ] $t (3 ms)\" ;; skip) echo \"[  SKIPPED ] $t (0 ms)\" ;;\n"
                      "    fail) echo \"[  FAILED  ] $t (1 ms)\" ;; hang) echo $$ >>'" + pids + "'; exec sleep 40 ;;\n"
                      "    crash) kill -SEGV $$ ;;\n  esac\ndone\n");
    }
    writeExecutable(carry_ / "bin" / "cuda_ipc_peer", "#!/bin/sh\necho 'usage: cuda_ipc_peer FD...' >&2\nexit 2\n");
    // The benches take --json FILE; nodevice is their exit 77.
    const std::string json = "while [ $# -gt 0 ]; do [ \"$1\" = --json ] && j=$2; shift; done\n";
    const std::string noDevice = bench == "nodevice" ? "echo 'no CUDA device'; exit 77\n" : "";
    writeExecutable(carry_ / "bin" / "reduce_device_bench",
                    "#!/bin/sh\n" + noDevice + json + "echo '{\"rows\": [{\"type\": \"float\", \"op\": \"sum\", "
                    "\"traffic_ratio\": 0.97}, {\"type\": \"bfloat16\", \"op\": \"max\", \"traffic_ratio\": " +
                    std::to_string(ratio) + "}]}' >\"$j\"\n");
    writeExecutable(carry_ / "bin" / "reccl-device-bench",
                    "#!/bin/sh\n" + noDevice + json + "echo '{\"rows\": [{\"device_busbw_gbs\": 41.5, "
                    "\"host_busbw_gbs\": 3.2, \"device_over_host\": 12.97, \"wrong\": 0}]}' >\"$j\"\n");
    // NCCL over the net plugin (its --out FILE); the plugin itself beside it, as prepare carries it.
    fs::create_directories(carry_ / "lib");
    std::ofstream(carry_ / "lib" / "libnccl-net-reccl.so") << "";
    writeExecutable(carry_ / "bin" / "torch_nccl_check",
                    "#!/bin/sh\n" + noDevice + "while [ $# -gt 0 ]; do [ \"$1\" = --out ] && j=$2; shift; done\n"
                    "echo '{\"checks\": {\"a\": [], \"b\": [], \"c\": [], \"d\": [], \"e\": [], \"f\": []}, "
                    "\"net_name\": [\"reccl\"], \"all_reduce_16M\": {\"us\": 4000, \"busbw_gbs\": 16.78}}' >\"$j\"\n");
  }

  // Runs the script to its end (or sends it TERM once `termWhen` holds, and counts the time from
  // there to its end into termToEnd_); its output in out_, summary.md in summary_. With the
  // smallest budget, 60 s, the device tests' step has 10 s.
  int run(const std::vector<std::string>& extraEnv = {}, const std::function<bool()>& termWhen = nullptr,
          int budget = 60) {
    out_ = dir_ / "out";
    std::vector<std::string> argv = {"/bin/bash", DEVICE_RUN_SCRIPT, "--carry", carry_.string(), "--out",
                                     out_.string(), "--budget", std::to_string(budget)};
    int rc;
    {
      // The device tool's $OUT would take the place of --out; a variable set here replaces the
      // inherited one.
      std::vector<std::string> drop = {"OUT="};
      for (const auto& kv : extraEnv) drop.push_back(kv.substr(0, kv.find('=') + 1));
      Child c(argv, extraEnv, dir_ / "stdout.txt", drop);
      if (termWhen) {
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!termWhen() && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        EXPECT_TRUE(termWhen()) << "the run never reached the point to stop it";
        c.signal(SIGTERM);
      }
      auto termAt = std::chrono::steady_clock::now();
      rc = c.wait(std::chrono::seconds(120));
      termToEnd_ = std::chrono::steady_clock::now() - termAt;
    }
    stdout_ = slurp(dir_ / "stdout.txt");
    summary_ = slurp(out_ / "summary.md");
    return rc;
  }

  // The summary's row for a check: "| check | result | detail |".
  std::string row(const std::string& check) const {
    size_t at = summary_.find("| " + check);
    if (at == std::string::npos) return "(no row " + check + ")";
    return summary_.substr(at, summary_.find('\n', at) - at);
  }

  // Every hung case's process has gone.
  void expectNoHangLeft() {
    std::ifstream in(dir_ / "pids");
    pid_t pid;
    while (in >> pid) {
      bool gone = false;
      for (int i = 0; i < 100 && !gone; ++i) {
        gone = ::kill(pid, 0) != 0 && errno == ESRCH;
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      EXPECT_TRUE(gone) << "hung test process " << pid << " outlived the run";
      if (!gone) ::kill(pid, SIGKILL);
    }
  }

  // The table is the last thing printed.
  void expectTableLast() const {
    std::string tail = stdout_.substr(stdout_.rfind("| check | result | detail |"));
    EXPECT_EQ(tail.find("== "), std::string::npos) << "something printed after the table:\n" << tail;
    EXPECT_NE(tail.find("| device allreduce"), std::string::npos) << stdout_;
  }

  fs::path carry_, out_;
  std::string stdout_, summary_;
  std::chrono::steady_clock::duration termToEnd_{};
};

// A run on a working GPU: every check passes, the script exits 0.
TEST_F(DeviceRunScript, EveryCheckPassingExitsZero) {
  makeCarry({}, 0.91);
  ASSERT_EQ(run(), 0) << stdout_;
  EXPECT_NE(row("device tests").find("| pass |"), std::string::npos) << row("device tests");
  EXPECT_NE(row("device tests").find("5 passed, 0 skipped"), std::string::npos) << row("device tests");
  for (const char* check : {"kernels = CPU", "stream gate", "collectives on streams", "CUDA IPC relay pipe",
                            "rail pulled mid device allreduce"})
    EXPECT_NE(row(check).find("| pass | 1 passed"), std::string::npos) << row(check);
  EXPECT_NE(row("kernel bw").find("| pass | 0.910 (bfloat16 max)"), std::string::npos) << row("kernel bw");
  EXPECT_NE(row("device allreduce").find("| pass | busbw 41.50 GB/s device, 3.20 host (x12.97), 0 wrong"),
            std::string::npos)
      << row("device allreduce");
  EXPECT_NE(row("NCCL over the reccl net plugin").find("| pass | 6 checks x 2 ranks, network reccl, 64 MiB all_reduce "
                                                      "busbw 16.78 GB/s"),
            std::string::npos)
      << row("NCCL over the reccl net plugin");
  EXPECT_NE(summary_.find("commit 0123abc"), std::string::npos) << summary_;
  expectTableLast();
}

// Without a GPU everything skips: no row says pass, and the run fails.
TEST_F(DeviceRunScript, NoDeviceIsNoPass) {
  std::map<std::string, std::string> skip;
  for (const auto& c : kCases) skip[c.name] = "skip";
  makeCarry(skip, 0.91, "nodevice");
  ASSERT_EQ(run(), 1) << stdout_;
  EXPECT_EQ(summary_.find("| pass |"), std::string::npos) << summary_;
  EXPECT_NE(row("device tests").find("| skipped | exit 0;"), std::string::npos) << row("device tests");
  EXPECT_NE(row("CUDA IPC relay pipe").find("| skipped |"), std::string::npos) << row("CUDA IPC relay pipe");
  EXPECT_NE(row("kernel bw").find("| skipped (no CUDA device) |"), std::string::npos) << row("kernel bw");
  EXPECT_NE(row("device allreduce").find("| skipped (no CUDA device) |"), std::string::npos) << row("device allreduce");
  EXPECT_NE(row("NCCL over the reccl net plugin").find("| skipped (no CUDA device) |"), std::string::npos)
      << row("NCCL over the reccl net plugin");
  expectTableLast();
}

TEST_F(DeviceRunScript, KernelUnderTheBarFails) {
  makeCarry({}, 0.75);
  ASSERT_EQ(run(), 1) << stdout_;
  EXPECT_NE(row("kernel bw").find("| FAIL | 0.750 (bfloat16 max)"), std::string::npos) << row("kernel bw");
  EXPECT_NE(row("device tests").find("| pass |"), std::string::npos) << row("device tests");
}

// A failed test fails its check; a hung one is stopped at the step's budget, named as never ended,
// fails its check, and leaves no process; the steps after it still run.
TEST_F(DeviceRunScript, FailedAndHungTestsFailTheirChecks) {
  makeCarry({{"IpcPipe.Echo", "fail"}, {"DeviceRailPull.BitExact", "hang"}}, 0.91);
  ASSERT_EQ(run(), 1) << stdout_;
  EXPECT_NE(row("device tests").find("| FAIL |"), std::string::npos) << row("device tests");
  EXPECT_NE(row("CUDA IPC relay pipe").find("| FAIL | 1 failed"), std::string::npos) << row("CUDA IPC relay pipe");
  EXPECT_NE(row("rail pulled mid device allreduce").find("| FAIL | 1 failed"), std::string::npos)
      << row("rail pulled mid device allreduce");
  EXPECT_NE(slurp(out_ / "ctest-device.log").find("DeviceRailPull.BitExact ....***Failed (never ended)"),
            std::string::npos)
      << slurp(out_ / "ctest-device.log");
  EXPECT_NE(row("kernels = CPU").find("| pass |"), std::string::npos) << row("kernels = CPU");
  EXPECT_NE(row("device allreduce").find("| pass |"), std::string::npos) << row("device allreduce");
  expectNoHangLeft();
  expectTableLast();
}

// An image without ctest: the programs run directly; a program that crashes mid-test fails that
// test's check, and the tests it never reached are missing, not passed.
TEST_F(DeviceRunScript, WithoutCtestACrashFailsItsCheck) {
  makeCarry({{"StreamCollectives.AllReduce", "crash"}}, 0.91);
  // PATH: every program of this machine's PATH but ctest.
  fs::path bin = dir_ / "path";
  fs::create_directories(bin);
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  for (size_t b = 0, e; b <= path.size(); b = e + 1) {
    e = path.find(':', b);
    if (e == std::string::npos) e = path.size();
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(path.substr(b, e - b), ec))
      if (f.path().filename() != "ctest" && !fs::exists(bin / f.path().filename()))
        fs::create_symlink(f.path(), bin / f.path().filename(), ec);
  }
  ASSERT_EQ(run({"PATH=" + bin.string()}), 1) << stdout_;
  std::string log = slurp(out_ / "ctest-device.log");
  EXPECT_NE(log.find("no ctest on this machine"), std::string::npos) << log;
  EXPECT_NE(log.find("cuda_device_test exited 139"), std::string::npos) << log;
  EXPECT_NE(row("kernels = CPU").find("| pass | 1 passed"), std::string::npos) << row("kernels = CPU");
  EXPECT_NE(row("collectives on streams").find("| FAIL | 1 failed"), std::string::npos)
      << row("collectives on streams");
  EXPECT_NE(row("CUDA IPC relay pipe").find("| missing |"), std::string::npos) << row("CUDA IPC relay pipe");
  EXPECT_NE(row("rail pulled mid device allreduce").find("| pass |"), std::string::npos)
      << row("rail pulled mid device allreduce");
  EXPECT_NE(row("device tests").find("| FAIL |"), std::string::npos) << row("device tests");
  EXPECT_TRUE(fs::exists(out_ / "gtest-device.log"));
  expectTableLast();
}

// A TERM from outside (the device tool's limit): the step's processes stop, the table prints at
// once and says why, and the run fails. The budget gives the hung step 250 s, so a TERM that
// waited for the step would show.
TEST_F(DeviceRunScript, TermPrintsTheTableAndStopsTheStep) {
  makeCarry({{"DeviceKernels.EveryTypeAndOp", "hang"}}, 0.91);
  int rc = run({}, [&] { return fs::exists(dir_ / "pids") && fs::file_size(dir_ / "pids") > 0; }, 400);
  EXPECT_LT(termToEnd_, std::chrono::seconds(30)) << "the run went on after the TERM";
  ASSERT_EQ(rc, 1) << stdout_;
  EXPECT_NE(row("run").find("| FAIL | stopped by a signal"), std::string::npos) << summary_;
  EXPECT_NE(stdout_.find("| run | FAIL | stopped by a signal"), std::string::npos) << stdout_;
  expectNoHangLeft();
}

}  // namespace
