// Launchers with no reccl variable set and no address given by hand: Open MPI's mpirun (rank 0's
// address through its PMIx server) and an srun-like environment (the step's node list and ids),
// running reccl-bench and a C application (api_worker: init, collectives, split, finalize).
// Skips with the reason where mpirun is not installed (openmpi-bin; scripts/setup.sh).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_child.h"
#include "temp_dir_test.h"
#include "core/launch_env.h"

namespace {

using reccl::benchtest::Child;
using reccl::benchtest::slurp;
namespace fs = std::filesystem;

// What a launcher's child must not inherit from the test's own environment.
const std::vector<std::string> kNoLauncherVars = {"RECCL_", "OMPI_", "PMIX_", "PMI_", "SLURM", "LOCAL_RANK=",
                                                  "LOCAL_WORLD_SIZE=", "TORCHELASTIC_"};

std::string findMpirun() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    fs::path p = fs::path(dir) / "mpirun";
    if (access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

bool portFree(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(port);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

class Launchers : public reccl::benchtest::TempDirTest {
 protected:
  Launchers() : TempDirTest("reccl-launchers-") {}

  // mpirun -np N [args...]: as root it needs --allow-run-as-root; fewer cores than ranks need
  // --oversubscribe.
  std::vector<std::string> mpirun(int n) {
    std::vector<std::string> a{mpirun_, "--allow-run-as-root", "-np", std::to_string(n)};
    if (std::thread::hardware_concurrency() < unsigned(n)) a.push_back("--oversubscribe");
    return a;
  }
  int run(const std::vector<std::string>& argv, const std::string& file, std::vector<std::string> env = {}) {
    Child c(argv, env, dir_ / file, kNoLauncherVars);
    return c.wait(std::chrono::seconds(240));
  }
  nlohmann::json read(const std::string& file) {
    Child c({"/usr/bin/python3", NCCL_TESTS_OUTPUT_PY, (dir_ / file).string()}, {}, dir_ / (file + ".parsed"));
    EXPECT_EQ(c.wait(std::chrono::seconds(60)), 0) << slurp(dir_ / (file + ".parsed"));
    return nlohmann::json::parse(slurp(dir_ / (file + ".parsed")), nullptr, false);
  }
  void needMpirun() {
    mpirun_ = findMpirun();
    if (mpirun_.empty()) GTEST_SKIP() << "mpirun is not installed (Debian's openmpi-bin; scripts/setup.sh installs it)";
  }
  std::string mpirun_;
};

// The issue's own command line: no RECCL_COMM_ID, no MASTER_ADDR.
TEST_F(Launchers, MpirunRunsTheBenchWithNoRecclVariables) {
  needMpirun();
  auto argv = mpirun(2);
  argv.insert(argv.end(), {RECCL_BENCH_PATH, "-g", "1", "-b", "1M", "-e", "4M", "-f", "2"});
  ASSERT_EQ(run(argv, "mpirun.txt"), 0) << slurp(dir_ / "mpirun.txt");
  const std::string out = slurp(dir_ / "mpirun.txt");
  EXPECT_NE(out.find("# nRanks 2: one per process"), std::string::npos) << out;
  auto j = read("mpirun.txt");
  ASSERT_EQ(j["rows"].size(), 3u) << out;  // 1M, 2M, 4M
  ASSERT_EQ(j["devices"].size(), 2u);
  EXPECT_NE(j["devices"][0]["pid"], j["devices"][1]["pid"]);
  EXPECT_EQ(j["out_of_bounds"], 0);
}

TEST_F(Launchers, MpirunRunsACApplicationWithSplitAndFinalize) {
  needMpirun();
  auto argv = mpirun(3);
  argv.insert(argv.end(), {RECCL_API_WORKER_PATH, "env"});
  ASSERT_EQ(run(argv, "api.txt"), 0) << slurp(dir_ / "api.txt");
  const std::string out = slurp(dir_ / "api.txt");
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(out.find("api_worker: rank " + std::to_string(r) + " of 3: ok"), std::string::npos) << out;
}

// Under PMIx a job bootstraps over ceil(n / RECCL_RANKS_PER_ROOT) roots (recclCommInitRankScalable):
// with 1 rank per root, each of the 3 ranks starts a root, shares its address through the
// launcher, and bootstraps over all 3; the application's split and collectives check out.
TEST_F(Launchers, MpirunSpreadsTheBootstrapOverSeveralRoots) {
  needMpirun();
  auto argv = mpirun(3);
  argv.insert(argv.end(), {"-x", "RECCL_RANKS_PER_ROOT=1", "-x", "RECCL_DEBUG=INFO", "-x",
                           "RECCL_DEBUG_SUBSYS=BOOTSTRAP,INIT", RECCL_API_WORKER_PATH, "env"});
  ASSERT_EQ(run(argv, "roots.txt"), 0) << slurp(dir_ / "roots.txt");
  const std::string out = slurp(dir_ / "roots.txt");
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(out.find("api_worker: rank " + std::to_string(r) + " of 3: ok"), std::string::npos) << out;
    EXPECT_NE(out.find("rank " + std::to_string(r) + ": bootstrap over 3 roots, block " + std::to_string(r)),
              std::string::npos)
        << out;
  }
  EXPECT_NE(out.find("and 2 more"), std::string::npos) << out;
}

// nccl-tests' README multi-node line, `mpirun -np 64 -N 8 ./build/all_reduce_perf -b 8 -e 8G -f 2
// -g 1`, with the process count and the largest size this one machine holds.
TEST_F(Launchers, ReadmeMpirunLineOnOneMachine) {
  needMpirun();
  fs::create_directories(dir_ / "build");
  fs::create_symlink(RECCL_BENCH_PATH, dir_ / "build" / "all_reduce_perf");
  auto argv = mpirun(2);
  argv.insert(argv.end(), {"-N", "2", (dir_ / "build" / "all_reduce_perf").string(), "-b", "8", "-e", "8M", "-f", "2",
                           "-g", "1"});
  ASSERT_EQ(run(argv, "readme.txt"), 0) << slurp(dir_ / "readme.txt");
  auto j = read("readme.txt");
  EXPECT_EQ(j["rows"].size(), 21u);  // 8 B .. 8 MiB
  EXPECT_EQ(j["out_of_bounds"], 0);
}

// What srun sets for a step of 2 tasks on one node (here: localhost), and nothing else.
TEST_F(Launchers, SrunLikeEnvironmentNeedsNoAddress) {
  // A job id whose derived port is free now (another test may hold one).
  std::mt19937 rng(std::random_device{}());
  std::string job;
  for (int i = 0; i < 100 && job.empty(); ++i) {
    std::string j = std::to_string(100000 + rng() % 900000);
    if (portFree(reccl::core::slurmStepPort(j, "0"))) job = j;
  }
  ASSERT_FALSE(job.empty());
  std::vector<std::unique_ptr<Child>> tasks;
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> env = {"SLURM_PROCID=" + std::to_string(r), "SLURM_NTASKS=2",
                                    "SLURM_LOCALID=" + std::to_string(r), "SLURM_NODEID=0",
                                    "SLURM_STEP_NODELIST=localhost", "SLURM_JOB_NODELIST=localhost",
                                    "SLURM_STEP_TASKS_PER_NODE=2", "SLURM_TASKS_PER_NODE=2",
                                    "SLURM_JOB_ID=" + job, "SLURM_STEP_ID=0", "SLURMD_NODENAME=localhost"};
    tasks.push_back(std::make_unique<Child>(
        std::vector<std::string>{RECCL_BENCH_PATH, "-b", "64K", "-e", "256K", "-f", "4", "-n", "3"}, env,
        dir_ / ("task" + std::to_string(r) + ".txt"), kNoLauncherVars));
  }
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(tasks[size_t(r)]->wait(std::chrono::seconds(240)), 0) << slurp(dir_ / ("task" + std::to_string(r) + ".txt"));
  auto j = read("task0.txt");
  EXPECT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["out_of_bounds"], 0);
}

// torchrun (Debian's PyTorch, for /usr/bin/python3): the static rendezvous, whose agent holds
// MASTER_PORT itself, and the c10d one (--standalone).
TEST_F(Launchers, TorchrunStaticAndStandalone) {
  if (run({"/usr/bin/python3", "-c", "import torch.distributed.run"}, "probe.txt") != 0)
    GTEST_SKIP() << "no torch for /usr/bin/python3 (Debian's python3-torch): " << slurp(dir_ / "probe.txt");
  const std::string port = std::to_string(20000 + getpid() % 10000);
  // Debian's torchrun (torch 1.13, Python 3.11) cannot parse its own default "--redirects 0":
  // "9:0" names no local rank, i.e. no redirection.
  const std::vector<std::string> base = {"/usr/bin/python3", "-m", "torch.distributed.run", "--redirects", "9:0",
                                         "--tee", "9:0", "--nproc_per_node", "2"};
  for (const auto& mode : {std::vector<std::string>{"--master_port", port}, std::vector<std::string>{"--standalone"}}) {
    auto argv = base;
    argv.insert(argv.end(), mode.begin(), mode.end());
    argv.insert(argv.end(), {"--no_python", RECCL_API_WORKER_PATH, "env"});
    ASSERT_EQ(run(argv, "torchrun.txt"), 0) << mode[0] << ": " << slurp(dir_ / "torchrun.txt");
    const std::string out = slurp(dir_ / "torchrun.txt");
    for (int r = 0; r < 2; ++r)
      EXPECT_NE(out.find("api_worker: rank " + std::to_string(r) + " of 2: ok"), std::string::npos) << mode[0] << out;
  }
}

TEST_F(Launchers, NoAddressAnywhereIsInvalidUsageNamingWhatToSet) {
  ASSERT_EQ(run({RECCL_BENCH_PATH, "-b", "1K", "-e", "1K"}, "none.txt",
                {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2"}),
            1);
  const std::string out = slurp(dir_ / "none.txt");
  EXPECT_NE(out.find("invalid usage"), std::string::npos) << out;
  EXPECT_NE(out.find("set MASTER_ADDR and MASTER_PORT, or RECCL_COMM_ID=host:port"), std::string::npos) << out;
}

// PMIx variables without a PMIx server behind them (copied from another job, or a stale shell):
// a usage error that says so, not a wait.
TEST_F(Launchers, PmixWithoutItsServerIsInvalidUsage) {
  ASSERT_EQ(run({RECCL_BENCH_PATH, "-b", "1K", "-e", "1K"}, "stale.txt",
                {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "PMIX_NAMESPACE=4242", "PMIX_RANK=0",
                 "RECCL_BOOTSTRAP_TIMEOUT_MS=5000"}),
            1);
  const std::string out = slurp(dir_ / "stale.txt");
  EXPECT_NE(out.find("invalid usage"), std::string::npos) << out;
  EXPECT_NE(out.find("RECCL_COMM_ID=host:port"), std::string::npos) << out;
}

}  // namespace
