// Which rail each TCP connection of a rank uses, from rail weights. Pure functions (unit-tested).
// The failover layer calls pickRail for each connection it moves off a failed rail (counting the
// connections of the same direction on each rail) and for each standby path (counting also the
// standbys of the connections that share the connection's rail, which move together when it
// fails), so that surviving NICs share the load instead of one taking everything; a fail-back
// returns a connection to its own rail. assignRails is the same rule applied to a whole set at
// once (the result those one-by-one picks reach from an even start).
#pragma once

#include <cstdint>
#include <vector>

namespace reccl::failover {

// weights[r] > 0: rail r usable with that relative capacity; <= 0: unusable.
// preferred[i]: the rail connection i would use with every rail healthy.
// Result[i]: the rail for connection i, or -1 when no rail is usable. A connection whose
// preferred rail is usable keeps it; the others go, one by one in index order, to the usable rail
// with the lowest (load + 1) / weight (ties: lowest index), counting loads of all connections.
std::vector<int> assignRails(const std::vector<int>& preferred, const std::vector<double>& weights);

// One connection leaving `exclude` (-1: none): the usable rail (not `exclude`) with the lowest
// (load + 1) / weight, given current per-rail connection counts. -1 when there is none.
int pickRail(const std::vector<int>& load, const std::vector<double>& weights, int exclude);

// Measured rail weights. The monitor samples the bytes each rail moved (TCP_INFO of its
// connections) every interval and smooths the rate; idle intervals (fewer than minBytes) say
// nothing about a rail's capacity and keep the previous estimate, so a rail that was down keeps
// its last figure for fail-back.
// Returns the new estimate in bytes/s: prev if bytes < minBytes or seconds <= 0; the sample
// itself if prev <= 0 (first measurement); else prev + alpha * (sample - prev).
double smoothThroughput(double prevBps, uint64_t bytes, double seconds, double alpha, uint64_t minBytes);
// Weights for assignRails/pickRail from measured throughputs: a rail whose bit is clear in
// `usable` gets 0; a usable rail with a measurement gets bps / (largest usable measurement); a
// usable rail never measured gets the mean of the measured usable weights (1 when none is).
std::vector<double> weightsFromThroughput(const std::vector<double>& bps, uint64_t usable);

}  // namespace reccl::failover
