// What detector.cpp and detector_loop.cpp share of Detector's private state: the tags of its
// epoll set and the per-namespace and per-link records.
#pragma once

#include <cstdint>
#include <memory>

#include "reccl/detector/detector.h"
#include "reccl/detector/neighbours.h"
#include "reccl/detector/rtnetlink_source.h"
#include "reccl/detector/rtnl_link.h"

namespace reccl::detector {

// An epoll entry's data: the tag in the high half, an argument (namespace index, fd) in the low.
enum Tag : uint64_t { kTagBpf = 1, kTagWake = 2, kTagTimer = 3, kTagRtnl = 4, kTagRdma = 5, kTagRdmaLoss = 6 };
inline uint64_t tag(Tag t, uint32_t arg = 0) { return (uint64_t(t) << 32) | arg; }

// Sets or clears a slot's DEGRADED bit (a gray symptom from userspace, or its end with the
// link's LinkUp) and bumps the epoch when the bit changed, so a data path sees it come and go.
inline void setSlotDegraded(reccl_link_slot& sl, bool on) {
  const uint64_t bit = RECCL_LINK_STATE_DEGRADED;
  const uint64_t old = on ? __atomic_fetch_or(&sl.state, bit, __ATOMIC_ACQ_REL)
                          : __atomic_fetch_and(&sl.state, ~bit, __ATOMIC_ACQ_REL);
  if (bool(old & bit) != on) __atomic_fetch_add(&sl.epoch, 1, __ATOMIC_RELEASE);
}

struct Detector::NetnsCtx {
  Netns ns;
  uint32_t index = 0;
  std::unique_ptr<RtnlLinkQuery> query;
  std::unique_ptr<RtnetlinkSource> rtnl;
  std::unique_ptr<NeighbourTable> neighbours;  // opened at the first link that comes back
  bool neighboursRefused = false;              // no CAP_NET_RAW there: not tried again
};

struct Detector::Watch {
  WatchedLink info;
  NetnsCtx* ctx = nullptr;
  uint64_t slotSeq = 0;  // newest carrier transition count applied to the slot
};

}  // namespace reccl::detector
