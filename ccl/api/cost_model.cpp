#include "api/cost_model.h"

#include <algorithm>
#include <cmath>

namespace reccl::api {
namespace {

constexpr double kMB = 1e6;
constexpr double kGuessA = CostModel::kGuessHopSeconds;
constexpr double kGuessB = kMB / CostModel::kGuessBytesPerSecond;
// Fastest bandwidth the fit may claim (1 TB/s): a fit on calls whose bytes were all tiny has
// little to say about the per-byte term, and must not make a large call free.
constexpr double kMinB = kMB / 1e12;
constexpr double kGuessWeight = 0.05;

}  // namespace

void CostModel::observe(const algo::Cost& c, double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds)) return;
  const double x1 = c.hops + 1, x2 = c.bytes / kMB;
  // Weighted by 1/t^2: the fit weighs each call's error relative to its time, so that a few
  // large calls do not leave the small ones priced at ten times what they take.
  const double w = 1 / (seconds * seconds);
  std::lock_guard lk(mu_);
  for (double* s : {&s11_, &s12_, &s22_, &s1t_, &s2t_}) *s *= kDecay;
  s11_ += w * x1 * x1;
  s12_ += w * x1 * x2;
  s22_ += w * x2 * x2;
  s1t_ += w * x1 * seconds;
  s2t_ += w * x2 * seconds;
}

CostModel::Fit CostModel::fit() const {
  std::lock_guard lk(mu_);
  // Least squares with the guess as two observations of a twentieth of a call's weight each: a
  // call of one hop and no bytes that took a0, and one of a megabyte and no hop that took b0 (a
  // ridge toward the guess, which the calls outweigh after one or two).
  const double pa = kGuessWeight / (kGuessA * kGuessA), pb = kGuessWeight / (kGuessB * kGuessB);
  const double m11 = s11_ + pa, m12 = s12_, m22 = s22_ + pb;
  const double r1 = s1t_ + pa * kGuessA, r2 = s2t_ + pb * kGuessB;
  const double det = m11 * m22 - m12 * m12;  // > 0: the matrix is positive definite
  double a = (r1 * m22 - m12 * r2) / det;
  double b = (m11 * r2 - m12 * r1) / det;
  // A negative term (noise, or calls whose times fell as they grew): fit the other alone.
  if (a < 0) {
    a = 0;
    b = r2 / m22;
  }
  if (b < kMinB) {
    b = kMinB;
    a = std::max(0.0, (r1 - m12 * b) / m11);
  }
  return {a, b};
}

double CostModel::estimateSeconds(const algo::Cost& c) const {
  const Fit f = fit();
  return f.a * (c.hops + 1) + f.b * c.bytes / kMB;
}

double CostModel::hopSeconds() const { return fit().a; }

double CostModel::bytesPerSecond() const { return kMB / fit().b; }

}  // namespace reccl::api
