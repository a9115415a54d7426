// Reduction kernel throughput per instruction set: float32, float16 and bfloat16 sum at an
// L1-sized, an L2-sized and an out-of-cache buffer. GB/s counts all memory traffic of one call,
// a + b read and dst written (3 x buffer bytes), out of place; printed as "GB=<n>/s".
//
//   reduce_bench --benchmark_min_time=0.2
//   reduce_bench --benchmark_filter='float/avx2' --benchmark_format=json
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "reduce.h"
#include "reduce_isa.h"

namespace reccl::reduce {
namespace {

void runKernel(benchmark::State& state, Isa isa, recclDataType_t type) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / typeSize(type);
  ReduceFn fn = kernelFor(isa, type, recclSum);
  // Small positive values, so no lane hits a denormal or NaN slow path.
  std::vector<unsigned char> a(bytes), b(bytes), d(bytes);
  for (size_t i = 0; i < count; ++i) {
    float v = 1.0f + float(i % 97) / 128.0f;
    if (type == recclFloat32) {
      std::memcpy(&a[i * 4], &v, 4);
      std::memcpy(&b[i * 4], &v, 4);
    } else {
      uint16_t h = type == recclFloat16 ? floatToHalf(v) : floatToBfloat16(v);
      std::memcpy(&a[i * 2], &h, 2);
      std::memcpy(&b[i * 2], &h, 2);
    }
  }
  for (auto _ : state) {
    fn(d.data(), a.data(), b.data(), count);
    benchmark::DoNotOptimize(d.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB"] = benchmark::Counter(double(state.iterations()) * 3.0 * double(bytes) / 1e9,
                                              benchmark::Counter::kIsRate);
  state.SetLabel(std::string(isaName(isa)) + " " + typeName(type) + " sum");
}

void registerAll() {
  const int64_t sizes[] = {8 << 10, 128 << 10, 64 << 20};  // L1, L2, out of cache (per buffer)
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isaSupported(isa)) continue;
    for (recclDataType_t type : {recclFloat32, recclFloat16, recclBfloat16}) {
      std::string name = std::string("reduce_sum/") + typeName(type) + "/" + isaName(isa);
      auto* b = benchmark::RegisterBenchmark(name.c_str(), [isa, type](benchmark::State& s) { runKernel(s, isa, type); });
      for (int64_t s : sizes) b->Arg(s);
    }
  }
}

}  // namespace
}  // namespace reccl::reduce

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 64;
  reccl::reduce::registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
