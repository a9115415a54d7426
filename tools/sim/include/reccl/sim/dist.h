// The random numbers of the simulator and the distributions it draws from.
//
// Every draw is an inverse CDF applied to a uniform, so one uniform stored with a fault gives each
// policy the same quantile of its own cost (common random numbers: two policies replaying one
// fault sequence differ by their rules, not by noise). std::mt19937_64 is specified bit for bit,
// so a seed gives the same faults with any standard library; std::*_distribution are not.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reccl/common/status.h"

namespace reccl::sim {

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return double(gen_() >> 11) * 0x1.0p-53; }
  // Exponential with the given mean.
  double exponential(double mean);

 private:
  std::mt19937_64 gen_;
};

// Standard normal quantile (Acklam's rational approximation polished by one Halley step:
// relative error below 1e-12 on (0, 1)). p outside (0, 1) is clamped to [1e-300, 1 - 1e-16].
double normalQuantile(double p);

// Two-sided 95 % Student t critical value for `df` degrees of freedom (t_{0.975, df}): exact
// table for df <= 30, the Cornish-Fisher expansion in 1/df above (error below 1e-5). df >= 1.
double studentT975(int df);

// A non-negative quantity: a constant, a log-normal given by its median and 99th percentile, an
// exponential given by its mean, or an empirical sample (e.g. the stalls a benchmark measured).
class Dist {
 public:
  enum class Kind { kConstant, kLogNormal, kExponential, kEmpirical };

  Dist() = default;
  static Dist constant(double v);
  static Dist logNormal(double median, double p99);  // requires 0 < median <= p99
  static Dist exponential(double mean);
  static Dist empirical(std::vector<double> values);  // requires a non-empty sample

  // The value at quantile u in [0, 1).
  double quantile(double u) const;
  double median() const { return quantile(0.5); }
  Kind kind() const { return kind_; }
  // The form parseDist reads.
  nlohmann::json toJson() const;

 private:
  Kind kind_ = Kind::kConstant;
  double a_ = 0;  // constant value, log-normal median, exponential mean
  double sigma_ = 0;
  std::vector<double> values_;  // sorted
};

// A number (constant), {"median": m, "p99": q}, {"mean": m} (exponential) or {"values": [...]};
// every value finite and >= 0 (medians > 0). Errors name `where`.
Result<Dist> parseDist(const nlohmann::json& j, const std::string& where);

}  // namespace reccl::sim
