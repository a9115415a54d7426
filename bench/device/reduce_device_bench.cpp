// reduce_device_bench: the device reduction kernels against a device-to-device copy of the same
// bytes, in the same run, as ratios (bench/device/run.sh; the bar is 0.8).
//
// For each (type, op): `--bytes` per buffer (dst = a OP b), timed with CUDA events over
// `--iters` launches, interleaved round by round with cudaMemcpyAsync of `--bytes` device to
// device; the median round of each. Memory traffic: the reduction reads 2 and writes 1 buffer,
// the copy reads 1 and writes 1. Reported:
//   traffic ratio = (3 B / t_reduce) / (2 B / t_copy)  -- bandwidth of the memory system each
//                   reaches; 1.0 means the kernel streams memory as fast as the copy engine path
//   time ratio    = t_copy / t_reduce                  -- output bytes per second, relative
// Exit: 0 ok (figures printed), 1 a CUDA call failed, 64 usage, 77 no CUDA device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cuda/device_reduce.h"
#include "reccl/common/params.h"
#include "reduce/reduce.h"

namespace {

#define CUDA_CHECK(call)                                                                 \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "reduce_device_bench: %s: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

struct Case {
  recclDataType_t type;
  recclRedOp_t op;
};

float timeLoop(cudaStream_t s, cudaEvent_t a, cudaEvent_t b, int iters, const std::function<void()>& body) {
  CUDA_CHECK(cudaEventRecord(a, s));
  for (int i = 0; i < iters; ++i) body();
  CUDA_CHECK(cudaEventRecord(b, s));
  CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms / float(iters);
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"reduce_device_bench: device reduction kernels vs a device-to-device copy of the same bytes"};
  app.footer(
      "Examples:\n"
      "  reduce_device_bench                      # every type with sum, float with every op, 1 GiB\n"
      "  reduce_device_bench --bytes 256M --json k.json");
  std::string bytesText = "1G";
  int iters = 20, rounds = 5;
  std::string jsonPath;
  app.add_option("--bytes", bytesText, "bytes per buffer (K/M/G)");
  app.add_option("--iters", iters, "launches per timed round")->check(CLI::Range(1, 100000));
  app.add_option("--rounds", rounds, "rounds (the median is reported)")->check(CLI::Range(1, 1000));
  app.add_option("--json", jsonPath, "write the figures as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 64;
  }
  auto parsed = reccl::params::parseSize(bytesText);
  if (!parsed.ok() || *parsed <= 0) {
    std::fprintf(stderr, "reduce_device_bench: --bytes: '%s' is not a size\n", bytesText.c_str());
    return 64;
  }
  const size_t bytes = static_cast<size_t>(*parsed);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::fprintf(stderr, "reduce_device_bench: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  void *a = nullptr, *b = nullptr, *d = nullptr;
  CUDA_CHECK(cudaMalloc(&a, bytes));
  CUDA_CHECK(cudaMalloc(&b, bytes));
  CUDA_CHECK(cudaMalloc(&d, bytes));
  CUDA_CHECK(cudaMemset(a, 0x3C, bytes));  // small finite values in every float type
  CUDA_CHECK(cudaMemset(b, 0x3B, bytes));
  CUDA_CHECK(cudaDeviceSynchronize());  // the memsets are on the legacy stream; `s` does not wait for it
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));

  std::vector<Case> cases;
  for (int t = 0; t < recclNumTypes; ++t) cases.push_back({static_cast<recclDataType_t>(t), recclSum});
  for (recclRedOp_t op : {recclProd, recclMax, recclMin, recclAvg}) cases.push_back({recclFloat32, op});
  for (recclRedOp_t op : {recclMax}) cases.push_back({recclBfloat16, op});

  std::printf("# reduce_device_bench: %s, %zu bytes per buffer, %d iters x %d rounds (median round)\n", prop.name,
              bytes, iters, rounds);
  std::printf("# %-9s %-4s %10s %10s %10s %10s %8s %8s\n", "type", "op", "reduce_us", "copy_us", "red_GB/s", "copy_GB/s",
              "traffic", "time");
  nlohmann::json rows = nlohmann::json::array();
  double worst = 1e9;
  for (const Case& c : cases) {
    const size_t n = bytes / reccl::reduce::typeSize(c.type);
    // Warm-up (first launch, clocks).
    CUDA_CHECK(reccl::reduce::cuda::launchReduce(d, a, b, n, c.type, c.op, 4, s));
    CUDA_CHECK(cudaMemcpyAsync(d, a, bytes, cudaMemcpyDeviceToDevice, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<float> tr, tc;
    for (int r = 0; r < rounds; ++r) {
      tc.push_back(timeLoop(s, e0, e1, iters, [&] { CUDA_CHECK(cudaMemcpyAsync(d, a, bytes, cudaMemcpyDeviceToDevice, s)); }));
      tr.push_back(timeLoop(s, e0, e1, iters, [&] {
        CUDA_CHECK(reccl::reduce::cuda::launchReduce(d, a, b, n, c.type, c.op, 4, s));
      }));
    }
    const double red = median(tr), copy = median(tc);  // ms
    const double redBw = 3.0 * double(bytes) / (red * 1e6), copyBw = 2.0 * double(bytes) / (copy * 1e6);
    const double traffic = redBw / copyBw, timeRatio = copy / red;
    worst = std::min(worst, traffic);
    std::printf("  %-9s %-4s %10.1f %10.1f %10.1f %10.1f %8.3f %8.3f\n", reccl::reduce::typeName(c.type),
                reccl::reduce::opName(c.op), red * 1e3, copy * 1e3, redBw, copyBw, traffic, timeRatio);
    rows.push_back({{"type", reccl::reduce::typeName(c.type)}, {"op", reccl::reduce::opName(c.op)}, {"bytes", bytes},
                    {"reduce_us", red * 1e3}, {"copy_us", copy * 1e3}, {"reduce_traffic_gbs", redBw},
                    {"copy_traffic_gbs", copyBw}, {"traffic_ratio", traffic}, {"time_ratio", timeRatio}});
  }
  std::printf("# worst traffic ratio: %.3f (bar: 0.8)\n", worst);
  if (!jsonPath.empty()) {
    nlohmann::json j{{"bench", "reduce_device_bench"}, {"device", prop.name}, {"bytes", bytes}, {"iters", iters},
                     {"rounds", rounds}, {"worst_traffic_ratio", worst}, {"rows", rows}};
    std::ofstream(jsonPath) << j.dump(2) << "\n";
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  return 0;
}
