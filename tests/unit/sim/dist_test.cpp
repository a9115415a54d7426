#include <gtest/gtest.h>

#include <cmath>

#include "reccl/sim/dist.h"

namespace reccl::sim {
namespace {

TEST(SimDist, NormalQuantileMatchesKnownValues) {
  EXPECT_NEAR(normalQuantile(0.5), 0.0, 1e-15);
  EXPECT_NEAR(normalQuantile(0.975), 1.959963984540054, 1e-12);
  EXPECT_NEAR(normalQuantile(0.99), 2.326347874040841, 1e-12);
  EXPECT_NEAR(normalQuantile(0.01), -2.326347874040841, 1e-12);
  EXPECT_NEAR(normalQuantile(1e-10), -6.361340902404056, 1e-9);
}

TEST(SimDist, StudentTMatchesTablesAndItsLimit) {
  EXPECT_NEAR(studentT975(1), 12.706204736, 1e-9);
  EXPECT_NEAR(studentT975(9), 2.262157163, 1e-9);
  EXPECT_NEAR(studentT975(30), 2.042272456, 1e-9);
  // Beyond the table: the expansion, against published values.
  EXPECT_NEAR(studentT975(31), 2.039513446, 1e-5);
  EXPECT_NEAR(studentT975(60), 2.000297822, 1e-6);
  EXPECT_NEAR(studentT975(1000), 1.962339081, 1e-6);
}

TEST(SimDist, LogNormalHitsItsMedianAndP99) {
  Dist d = Dist::logNormal(0.0139, 0.320);
  EXPECT_NEAR(d.quantile(0.5), 0.0139, 1e-12);
  EXPECT_NEAR(d.quantile(0.99), 0.320, 1e-9);
  EXPECT_LT(d.quantile(0.1), d.quantile(0.9));
}

TEST(SimDist, EmpiricalQuantilesPickTheSortedSample) {
  Dist d = Dist::empirical({3, 1, 2, 4});
  EXPECT_EQ(d.quantile(0.0), 1);
  EXPECT_EQ(d.quantile(0.26), 2);
  EXPECT_EQ(d.quantile(0.74), 3);
  EXPECT_EQ(d.quantile(0.999), 4);
}

TEST(SimDist, SameSeedSameUniformsInHalfOpenUnitInterval) {
  Rng a(7), b(7);
  for (int i = 0; i < 1000; ++i) {
    double x = a.uniform();
    ASSERT_EQ(x, b.uniform());
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
  }
}

struct BadDist {
  const char* json;
  const char* message;
};
class SimDistRejects : public ::testing::TestWithParam<BadDist> {};
TEST_P(SimDistRejects, NamingTheField) {
  auto r = parseDist(nlohmann::json::parse(GetParam().json), "faults.repair_s");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), GetParam().message);
}
INSTANTIATE_TEST_SUITE_P(
    All, SimDistRejects,
    ::testing::Values(BadDist{"-1", "faults.repair_s: must be a finite number >= 0"},
                      BadDist{"\"1h\"", "faults.repair_s: must be a number, {\"median\", \"p99\"}, {\"mean\"} or {\"values\"}"},
                      BadDist{"{\"median\": 5}", "faults.repair_s.p99: missing"},
                      BadDist{"{\"median\": 5, \"p99\": 1}", "faults.repair_s.p99: must be >= the median"},
                      BadDist{"{\"median\": 0, \"p99\": 1}", "faults.repair_s.median: must be > 0"},
                      BadDist{"{\"p50\": 5, \"p99\": 9}", "faults.repair_s: unknown key \"p50\""},
                      BadDist{"{\"values\": []}", "faults.repair_s.values: must be a non-empty array of numbers"},
                      BadDist{"{\"values\": [1, \"x\"]}", "faults.repair_s.values[1]: must be a number"},
                      BadDist{"{\"mean\": 3, \"median\": 3}", "faults.repair_s: \"mean\" goes alone"}));

}  // namespace
}  // namespace reccl::sim
