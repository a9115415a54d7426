// RECCL_REDUCE_ISA caps the kernels kernel() hands out. The variable is read once per process,
// so each case checks it in a fresh child process (gtest's death-test machinery).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "reduce.h"
#include "reduce_isa.h"

namespace reccl::reduce {
namespace {

Isa bestIsa() {
  return isaSupported(Isa::kAvx512) ? Isa::kAvx512 : isaSupported(Isa::kAvx2) ? Isa::kAvx2 : Isa::kScalar;
}

// Exits 0 when, with RECCL_REDUCE_ISA=value, the process selects `want` and hands out its kernels.
[[noreturn]] void checkInChild(const char* value, Isa want) {
  ::setenv("RECCL_REDUCE_ISA", value, 1);
  bool ok = selectedIsa() == want && std::strcmp(isaName(), isaName(want)) == 0 &&
            kernel(recclBfloat16, recclMax) == kernelFor(want, recclBfloat16, recclMax);
  std::_Exit(ok ? 0 : 1);
}

TEST(ReduceIsaCap, ScalarCapSelectsScalarKernels) {
  EXPECT_EXIT(checkInChild("scalar", Isa::kScalar), ::testing::ExitedWithCode(0), "");
}

TEST(ReduceIsaCap, Avx2CapNeverSelectsAvx512) {
  Isa want = isaSupported(Isa::kAvx2) ? Isa::kAvx2 : Isa::kScalar;
  EXPECT_EXIT(checkInChild("AVX2", want), ::testing::ExitedWithCode(0), "");
}

TEST(ReduceIsaCap, CapAboveTheCpuKeepsTheBestSupported) {
  EXPECT_EXIT(checkInChild("avx512", bestIsa()), ::testing::ExitedWithCode(0), "");
}

TEST(ReduceIsaCap, UnknownValueWarnsAndKeepsTheBest) {
  EXPECT_EXIT(checkInChild("sse9", bestIsa()), ::testing::ExitedWithCode(0), "RECCL_REDUCE_ISA");
}

}  // namespace
}  // namespace reccl::reduce
