// What one operation asks of the network, in the terms of the algorithms that run it
// (algo/collectives.h): the hops that follow one another (a ring's steps, recursive doubling's
// rounds, the pairs of an all-to-all) and the bytes the busiest rank moves over its links. The
// group simulation (recclGroupSimulateEnd) prices these with what a communicator measured of its
// own calls (api/cost_model.h).
#pragma once

#include "algo/collective.h"
#include "channel/channel_set.h"

namespace reccl::algo {

struct Cost {
  double hops = 0;
  double bytes = 0;
};

// `c` as this rank of `cs` would run it. Sends and receives (a group's, a gather's, a scatter's)
// are this rank's own: the larger of what it sends and what it receives, in one hop.
Cost costOf(const channel::ChannelSet& cs, const Collective& c);

}  // namespace reccl::algo
