// What a communicator's own calls cost, learned from them, for recclGroupSimulateEnd. A call of
// cost (hops, bytes) (algo/cost.h) is taken to last a·(hops + 1) + b·bytes: a per hop (the +1:
// the call's own entry and exit), b per byte, the inverse of the bandwidth the busiest rank saw.
// Every host call that succeeded without making connections is an observation; the two are
// fitted by least squares on relative error over the recent ones (older ones weigh less and
// less), held toward a first guess (50 us a hop, 1 GB/s) with the weight of a twentieth of an
// observation, so that a communicator that has run nothing, or one size only, still answers, and
// one that ran a mix answers with what this machine does.
#pragma once

#include <mutex>

#include "algo/cost.h"

namespace reccl::api {

class CostModel {
 public:
  static constexpr double kGuessHopSeconds = 50e-6;
  static constexpr double kGuessBytesPerSecond = 1e9;
  // How much one observation's weight shrinks with each later one.
  static constexpr double kDecay = 0.95;

  void observe(const algo::Cost& c, double seconds);
  double estimateSeconds(const algo::Cost& c) const;
  // The fitted seconds per hop and bytes per second.
  double hopSeconds() const;
  double bytesPerSecond() const;

 private:
  struct Fit {
    double a, b;  // seconds per hop, seconds per MB
  };
  Fit fit() const;

  mutable std::mutex mu_;
  // Decayed sums of x1 = hops + 1, x2 = bytes in MB, t = seconds.
  double s11_ = 0, s12_ = 0, s22_ = 0, s1t_ = 0, s2t_ = 0;
};

}  // namespace reccl::api
