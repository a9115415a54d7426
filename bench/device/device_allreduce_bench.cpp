// reccl-device-bench: allreduce on device buffers and a CUDA stream, with the same allreduce on
// host buffers (NULL stream) in the same run as the peer, ranks as processes (they may share one
// GPU). Each size is timed (warm-up, barrier, --iters calls, the slowest rank's average) and then
// checked bit for bit with reccl-bench's closed forms.
//
//   reccl-device-bench --ranks 4 --sizes 1M,16M,64M --json out.json   # spawns 4 ranks on loopback
//   reccl testbed run --name tb -- reccl-device-bench --sizes 64M        # ranks from the launcher
//
// busbw as nccl-tests: bytes / time x 2(n-1)/n. Rank 0 prints the table and writes the JSON.
// Exit: 0 ok, 1 a call failed or a result was wrong, 64 usage, 77 no CUDA device.
#include <cuda_runtime_api.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench_data.h"
#include "reccl/common/params.h"
#include "reccl/reccl.h"

extern char** environ;

namespace {

using reccl::bench::Coll;

constexpr int kOk = 0, kFailed = 1, kUsage = 64, kNoDevice = 77;

struct Options {
  int ranks = 0;  // >0: spawn that many rank processes on loopback
  std::vector<size_t> sizes;
  int iters = 20;
  int warmup = 3;
  std::string jsonPath;
};

uint16_t freePort() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  uint16_t port = 0;
  if (s >= 0 && bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (s >= 0) close(s);
  return port;
}

// The launcher: this program again, once per rank, with a torchrun-style environment.
int spawnRanks(int n, int argc, char** argv) {
  uint16_t port = freePort();
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    for (auto [k, v] : {std::pair<const char*, int>{"RANK", r}, {"LOCAL_RANK", r}, {"WORLD_SIZE", n}, {"MASTER_PORT", port}})
      env.push_back(std::string(k) + "=" + std::to_string(v));
    env.push_back("MASTER_ADDR=127.0.0.1");
    std::vector<char*> envp;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    // Same arguments without --ranks.
    std::vector<std::string> args{"/proc/self/exe"};
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--ranks") {
        ++i;
        continue;
      }
      if (a.rfind("--ranks=", 0) == 0) continue;
      args.push_back(a);
    }
    std::vector<char*> av;
    for (auto& a : args) av.push_back(a.data());
    av.push_back(nullptr);
    pid_t pid = -1;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, av.data(), envp.data()) != 0) {
      std::perror("reccl-device-bench: posix_spawn");
      for (pid_t p : pids) kill(p, SIGKILL);
      return kFailed;
    }
    pids.push_back(pid);
  }
  int worst = kOk;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : kFailed;
    if (code != kOk && worst == kOk) worst = code;
  }
  return worst;
}

struct Row {
  size_t bytes;
  double devUs, hostUs, devBusBw, hostBusBw;
  uint64_t wrong;
};

class Rank {
 public:
  Rank(const Options& o, recclComm_t comm, int rank, int n) : o_(o), comm_(comm), rank_(rank), n_(n) {}

  bool run(std::vector<Row>* rows) {
    if (cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess) return fail("cudaStreamCreate");
    for (size_t bytes : o_.sizes) {
      Row r{};
      r.bytes = bytes / 4 * 4;
      if (!one(r.bytes, true, &r.devUs, &r.wrong) || !one(r.bytes, false, &r.hostUs, &r.wrong)) return false;
      double factor = 2.0 * (n_ - 1) / n_;
      r.devBusBw = double(r.bytes) / (r.devUs * 1e3) * factor;
      r.hostBusBw = double(r.bytes) / (r.hostUs * 1e3) * factor;
      rows->push_back(r);
    }
    cudaStreamDestroy(stream_);
    return true;
  }

 private:
  bool fail(const std::string& what) {
    std::fprintf(stderr, "reccl-device-bench: rank %d: %s failed: %s\n", rank_, what.c_str(), recclGetLastError(comm_));
    return false;
  }

  // Times and checks one size, on device buffers and a stream or on host buffers.
  bool one(size_t bytes, bool device, double* us, uint64_t* wrong) {
    const size_t count = bytes / 4;
    reccl::bench::DataSpec d{Coll::kAllReduce, recclFloat32, recclSum, n_, 0};
    reccl::bench::Shape s = reccl::bench::shapeFor(Coll::kAllReduce, count, n_, rank_);
    std::vector<unsigned char> in(bytes), out(bytes);
    reccl::bench::fillInput(d, rank_, s, in.data());
    void *send = nullptr, *recv = nullptr;
    if (device) {
      if (cudaMalloc(&send, bytes) != cudaSuccess || cudaMalloc(&recv, bytes) != cudaSuccess) return fail("cudaMalloc");
      // A copy from pageable memory may return before its DMA lands (on the legacy stream, which
      // the call's non-blocking stream does not wait for): the device is synchronised first.
      if (cudaMemcpy(send, in.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
          cudaDeviceSynchronize() != cudaSuccess)
        return fail("input copy");
    } else {
      send = in.data();
      recv = out.data();
    }
    recclStream_t st = device ? reinterpret_cast<recclStream_t>(stream_) : nullptr;
    auto call = [&] { return recclAllReduce(send, recv, count, recclFloat32, recclSum, comm_, st); };
    bool ok = true;
    for (int i = 0; i < o_.warmup && ok; ++i) ok = call() == recclSuccess;
    if (device) cudaStreamSynchronize(stream_);
    ok = ok && recclBarrier(comm_, nullptr) == recclSuccess;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters && ok; ++i) ok = call() == recclSuccess;
    if (device) cudaStreamSynchronize(stream_);
    double mine = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / o_.iters;
    ok = ok && recclAllReduce(&mine, us, 1, recclFloat64, recclMax, comm_, nullptr) == recclSuccess;
    // Check: output poisoned, one more call, every element against the closed form.
    if (ok) {
      if (device) {
        // On the call's stream: a plain cudaMemset goes to the legacy stream, which a non-blocking
        // stream does not wait for, so the poison could land after the result.
        ok = cudaMemsetAsync(recv, 0xA5, bytes, stream_) == cudaSuccess && call() == recclSuccess &&
             cudaStreamSynchronize(stream_) == cudaSuccess &&
             cudaMemcpy(out.data(), recv, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
      } else {
        std::memset(out.data(), 0xA5, bytes);
        ok = call() == recclSuccess;
      }
    }
    uint64_t w = ok ? reccl::bench::countWrong(d, rank_, s, out.data()) : 0;
    ok = ok && recclAllReduce(&w, &w, 1, recclUint64, recclSum, comm_, nullptr) == recclSuccess;
    *wrong += w;
    if (device) {
      cudaFree(send);
      cudaFree(recv);
    }
    return ok ? true : fail(std::string(device ? "device" : "host") + " allreduce of " + std::to_string(bytes) + " bytes");
  }

  const Options& o_;
  recclComm_t comm_;
  int rank_, n_;
  cudaStream_t stream_ = nullptr;
};

int runRank(const Options& o, int argc, char** argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::fprintf(stderr, "reccl-device-bench: no CUDA device\n");
    return kNoDevice;
  }
  const char* lr = getenv("LOCAL_RANK");
  if (cudaSetDevice((lr ? atoi(lr) : 0) % ndev) != cudaSuccess) return kFailed;
  recclComm_t comm = nullptr;
  if (recclResult_t r = recclCommInitFromEnv(&comm); r != recclSuccess) {
    std::fprintf(stderr, "reccl-device-bench: recclCommInitFromEnv: %s: %s\n", recclGetErrorString(r),
                 recclGetLastError(nullptr));
    return kFailed;
  }
  int rank = 0, n = 1;
  recclCommUserRank(comm, &rank);
  recclCommCount(comm, &n);
  std::vector<Row> rows;
  Rank runner(o, comm, rank, n);
  bool ok = runner.run(&rows);
  if (!ok) {
    recclCommAbort(comm);
    return kFailed;
  }
  recclCommDestroy(comm);
  uint64_t wrong = 0;
  for (const auto& r : rows) wrong += r.wrong;
  if (rank != 0) return wrong ? kFailed : kOk;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("# reccl-device-bench: allreduce float sum, %d ranks (processes) on %d GPU(s) (%s), %d iters\n", n,
              std::min(n, ndev), prop.name, o.iters);
  std::printf("# %12s %12s %12s %12s %12s %8s %6s\n", "bytes", "device_us", "dev_busbw", "host_us", "host_busbw",
              "dev/host", "wrong");
  nlohmann::json jr = nlohmann::json::array();
  for (const auto& r : rows) {
    std::printf("  %12zu %12.1f %12.3f %12.1f %12.3f %8.3f %6" PRIu64 "\n", r.bytes, r.devUs, r.devBusBw, r.hostUs,
                r.hostBusBw, r.devBusBw / r.hostBusBw, r.wrong);
    jr.push_back({{"bytes", r.bytes}, {"device_us", r.devUs}, {"device_busbw_gbs", r.devBusBw}, {"host_us", r.hostUs},
                  {"host_busbw_gbs", r.hostBusBw}, {"device_over_host", r.devBusBw / r.hostBusBw}, {"wrong", r.wrong}});
  }
  if (!o.jsonPath.empty()) {
    std::ostringstream cmd;
    for (int i = 0; i < argc; ++i) cmd << (i ? " " : "") << argv[i];
    nlohmann::json j{{"bench", "reccl-device-bench"}, {"ranks", n}, {"gpus", std::min(n, ndev)}, {"device", prop.name},
                     {"iters", o.iters}, {"argv", cmd.str()}, {"rows", jr}};
    std::ofstream(o.jsonPath) << j.dump(2) << "\n";
  }
  return wrong ? kFailed : kOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"reccl-device-bench: allreduce on device buffers and CUDA streams, with the host path beside it"};
  app.footer(
      "Examples:\n"
      "  reccl-device-bench --ranks 4                           # 4 rank processes on loopback, one GPU\n"
      "  reccl-device-bench --ranks 2 --sizes 64M --iters 50 --json ar.json\n"
      "  reccl testbed run --name tb -- reccl-device-bench --sizes 16M   # ranks from the launcher");
  Options o;
  std::string sizes = "1M,16M,64M";
  app.add_option("--ranks", o.ranks, "spawn this many rank processes on loopback (else ranks come from the launcher)")
      ->check(CLI::Range(1, 64));
  app.add_option("--sizes", sizes, "comma list of message sizes in bytes (K/M/G)");
  app.add_option("--iters", o.iters, "timed calls per size")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", o.warmup, "untimed calls per size")->check(CLI::Range(0, 1000));
  app.add_option("--json", o.jsonPath, "rank 0 writes the figures here");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kOk : kUsage;
  }
  std::stringstream ss(sizes);
  for (std::string t; std::getline(ss, t, ',');) {
    auto v = reccl::params::parseSize(t);
    if (!v.ok() || *v < 4) {
      std::fprintf(stderr, "reccl-device-bench: --sizes: '%s' is not a size of at least 4 bytes\n", t.c_str());
      return kUsage;
    }
    o.sizes.push_back(static_cast<size_t>(*v));
  }
  if (o.ranks > 0) return spawnRanks(o.ranks, argc, argv);
  return runRank(o, argc, argv);
}
