#include "failover/rebalance/rebalance.h"

#include <cstddef>

namespace reccl::failover {

int pickRail(const std::vector<int>& load, const std::vector<double>& weights, int exclude) {
  int best = -1;
  double bestCost = 0;
  for (size_t r = 0; r < weights.size(); ++r) {
    if (weights[r] <= 0 || static_cast<int>(r) == exclude) continue;
    double cost = ((r < load.size() ? load[r] : 0) + 1) / weights[r];
    if (best < 0 || cost < bestCost) {
      best = static_cast<int>(r);
      bestCost = cost;
    }
  }
  return best;
}

std::vector<int> assignRails(const std::vector<int>& preferred, const std::vector<double>& weights) {
  std::vector<int> out(preferred.size(), -1);
  std::vector<int> load(weights.size(), 0);
  auto usable = [&](int r) { return r >= 0 && static_cast<size_t>(r) < weights.size() && weights[r] > 0; };
  for (size_t i = 0; i < preferred.size(); ++i) {
    if (usable(preferred[i])) {
      out[i] = preferred[i];
      ++load[preferred[i]];
    }
  }
  for (size_t i = 0; i < preferred.size(); ++i) {
    if (out[i] >= 0) continue;
    int r = pickRail(load, weights, -1);
    if (r < 0) break;
    out[i] = r;
    ++load[r];
  }
  return out;
}

double smoothThroughput(double prevBps, uint64_t bytes, double seconds, double alpha, uint64_t minBytes) {
  if (seconds <= 0 || bytes < minBytes) return prevBps;
  double sample = static_cast<double>(bytes) / seconds;
  if (prevBps <= 0) return sample;
  return prevBps + alpha * (sample - prevBps);
}

std::vector<double> weightsFromThroughput(const std::vector<double>& bps, uint64_t usable) {
  std::vector<double> w(bps.size(), 0.0);
  auto ok = [&](size_t r) { return r < 64 && ((usable >> r) & 1u); };
  double best = 0;
  for (size_t r = 0; r < bps.size(); ++r)
    if (ok(r) && bps[r] > best) best = bps[r];
  double sum = 0;
  int measured = 0;
  for (size_t r = 0; r < bps.size(); ++r) {
    if (!ok(r) || bps[r] <= 0) continue;
    w[r] = bps[r] / best;
    sum += w[r];
    ++measured;
  }
  double fill = measured ? sum / measured : 1.0;
  for (size_t r = 0; r < bps.size(); ++r)
    if (ok(r) && bps[r] <= 0) w[r] = fill;
  return w;
}

}  // namespace reccl::failover
