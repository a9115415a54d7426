#include "reccl/sim/dist.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

namespace reccl::sim {

using nlohmann::json;

double Rng::exponential(double mean) { return -mean * std::log1p(-uniform()); }

double normalQuantile(double p) {
  p = std::clamp(p, 1e-300, 1.0 - 1e-16);
  static constexpr std::array<double, 6> a{-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                           1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr std::array<double, 5> b{-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                           6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr std::array<double, 6> c{-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                           -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr std::array<double, 4> d{7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                           3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  double x;
  if (p < kLow || p > 1 - kLow) {
    double q = std::sqrt(-2 * std::log(p < kLow ? p : 1 - p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    if (p > 1 - kLow) x = -x;
  } else {
    double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  // One Halley step on the exact CDF.
  double e = 0.5 * std::erfc(-x / std::numbers::sqrt2) - p;
  double u = e * std::sqrt(2 * std::numbers::pi) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

double studentT975(int df) {
  static constexpr std::array<double, 30> kTable{
      12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851, 2.364624252, 2.306004135,
      2.262157163,  2.228138852, 2.200985160, 2.178812830, 2.160368656, 2.144786688, 2.131449546, 2.119905299,
      2.109815578,  2.100922040, 2.093024054, 2.085963447, 2.079613845, 2.073873068, 2.068657610, 2.063898562,
      2.059538553,  2.055529439, 2.051830516, 2.048407142, 2.045229642, 2.042272456};
  if (df < 1) df = 1;
  if (df <= 30) return kTable[size_t(df - 1)];
  const double z = 1.959963984540054, v = df;
  const double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z, z9 = z7 * z * z;
  const double g1 = (z3 + z) / 4;
  const double g2 = (5 * z5 + 16 * z3 + 3 * z) / 96;
  const double g3 = (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / 384;
  const double g4 = (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / 92160;
  return z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v);
}

Dist Dist::constant(double v) {
  Dist d;
  d.kind_ = Kind::kConstant;
  d.a_ = v;
  return d;
}

Dist Dist::logNormal(double median, double p99) {
  Dist d;
  d.kind_ = Kind::kLogNormal;
  d.a_ = median;
  d.sigma_ = std::log(p99 / median) / normalQuantile(0.99);
  return d;
}

Dist Dist::exponential(double mean) {
  Dist d;
  d.kind_ = Kind::kExponential;
  d.a_ = mean;
  return d;
}

Dist Dist::empirical(std::vector<double> values) {
  Dist d;
  d.kind_ = Kind::kEmpirical;
  std::sort(values.begin(), values.end());
  d.values_ = std::move(values);
  return d;
}

double Dist::quantile(double u) const {
  switch (kind_) {
    case Kind::kConstant:
      return a_;
    case Kind::kLogNormal:
      return sigma_ == 0 ? a_ : a_ * std::exp(sigma_ * normalQuantile(u));
    case Kind::kExponential:
      return -a_ * std::log1p(-std::min(u, 1.0 - 1e-16));
    case Kind::kEmpirical: {
      size_t i = size_t(std::max(0.0, u) * double(values_.size()));
      return values_[std::min(i, values_.size() - 1)];
    }
  }
  return a_;
}

json Dist::toJson() const {
  switch (kind_) {
    case Kind::kConstant: return a_;
    case Kind::kLogNormal: return {{"median", a_}, {"p99", a_ * std::exp(sigma_ * normalQuantile(0.99))}};
    case Kind::kExponential: return {{"mean", a_}};
    case Kind::kEmpirical: return {{"values", values_}};
  }
  return nullptr;
}

namespace {

Status bad(const std::string& where, const std::string& what) { return {Errc::kInvalidArgument, where + ": " + what}; }

Result<double> nonNegative(const json& j, const std::string& where) {
  if (!j.is_number()) return bad(where, "must be a number");
  double v = j.get<double>();
  if (!std::isfinite(v) || v < 0) return bad(where, "must be a finite number >= 0");
  return v;
}

}  // namespace

Result<Dist> parseDist(const json& j, const std::string& where) {
  if (j.is_number()) {
    RECCL_ASSIGN_OR_RETURN(double v, nonNegative(j, where));
    return Dist::constant(v);
  }
  if (!j.is_object())
    return bad(where, "must be a number, {\"median\", \"p99\"}, {\"mean\"} or {\"values\"}");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "median" && it.key() != "p99" && it.key() != "mean" && it.key() != "values")
      return bad(where, "unknown key \"" + it.key() + "\"");
  if (j.contains("values")) {
    if (j.size() != 1) return bad(where, "\"values\" goes alone");
    const json& v = j["values"];
    if (!v.is_array() || v.empty()) return bad(where + ".values", "must be a non-empty array of numbers");
    std::vector<double> out;
    for (size_t i = 0; i < v.size(); ++i) {
      RECCL_ASSIGN_OR_RETURN(double x, nonNegative(v[i], where + ".values[" + std::to_string(i) + "]"));
      out.push_back(x);
    }
    return Dist::empirical(std::move(out));
  }
  if (j.contains("mean")) {
    if (j.size() != 1) return bad(where, "\"mean\" goes alone");
    RECCL_ASSIGN_OR_RETURN(double m, nonNegative(j["mean"], where + ".mean"));
    return Dist::exponential(m);
  }
  if (!j.contains("median")) return bad(where + ".median", "missing");
  if (!j.contains("p99")) return bad(where + ".p99", "missing");
  RECCL_ASSIGN_OR_RETURN(double med, nonNegative(j["median"], where + ".median"));
  RECCL_ASSIGN_OR_RETURN(double p99, nonNegative(j["p99"], where + ".p99"));
  if (med <= 0) return bad(where + ".median", "must be > 0");
  if (p99 < med) return bad(where + ".p99", "must be >= the median");
  return Dist::logNormal(med, p99);
}

}  // namespace reccl::sim
