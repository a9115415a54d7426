// The long failover soak (ctest label `soak`, not part of the default run): the seeded random
// fault plan of failover_job.h for RECCL_SOAK_ITERATIONS iterations of every collective in turn.
//
//   RECCL_SOAK_ITERATIONS=20000 ctest --test-dir build -L soak --output-on-failure
//   RECCL_SOAK_ITERATIONS=20000 RECCL_SOAK_SEED=7 build/bin/failover_soak_test
//
// Without RECCL_SOAK_ITERATIONS the test is skipped (so that the whole-suite run stays short).
#include <gtest/gtest.h>

#include <cstdlib>

#include "failover_job.h"

namespace {

using FailoverSoak = reccl::test::failover::FailoverTest<2>;

TEST_F(FailoverSoak, SeededRandomFaultsLong) {
  const char* iters = getenv("RECCL_SOAK_ITERATIONS");
  if (!iters) GTEST_SKIP() << "long soak: set RECCL_SOAK_ITERATIONS (e.g. 20000) and run ctest -L soak";
  int n = atoi(iters);
  ASSERT_GE(n, 1) << "RECCL_SOAK_ITERATIONS=" << iters;
  unsigned seed = getenv("RECCL_SOAK_SEED") ? static_cast<unsigned>(atoi(getenv("RECCL_SOAK_SEED"))) : 20261129u;
  // ~5 ms per iteration on a loaded 2-core VM, plus fault stalls; generous.
  runSoak(seed, n, 120 + n / 20);
}

}  // namespace
