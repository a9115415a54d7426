// What a source reports about one link before the state machine judges it: the raw kernel or
// netlink observation, stamped with CLOCK_MONOTONIC time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "reccl_bpf/link_event.h"

namespace reccl::detector {

using LinkKind = reccl_link_kind;
using LinkSource = reccl_link_source;

// A link is a device in a network namespace, named by the namespace's inode and the ifindex.
struct LinkKey {
  uint32_t netnsIno = 0;
  uint32_t ifindex = 0;
  bool operator==(const LinkKey&) const = default;
  auto operator<=>(const LinkKey&) const = default;
};

struct LinkKeyHash {
  size_t operator()(const LinkKey& k) const noexcept {
    return std::hash<uint64_t>{}((uint64_t(k.netnsIno) << 32) | k.ifindex);
  }
};

struct LinkSignal {
  LinkKind kind = RECCL_LINK_KIND_NONE;
  LinkSource source = RECCL_LINK_SRC_NONE;
  uint64_t tsNs = 0;  // when the kernel saw it (BPF) or userspace received it (netlink)
  LinkKey link;
  std::string ifname;
  // Device carrier transition count (down + up) when the source read it; orders signals of
  // different sources for one device. Empty when the source cannot read it.
  std::optional<uint64_t> carrierSeq;
  // The device's carrier_down_count at the same read: counts flaps the kernel coalesced (its
  // link-watch work runs at most once a second for some devices, so a storm can pass between
  // two reports).
  std::optional<uint32_t> carrierDowns;
  uint64_t value = 0;  // kind-specific, see reccl_link_event.value
};

enum class Direction { kNone, kDown, kUp, kDegraded };
Direction directionOf(LinkKind kind) noexcept;

const char* kindName(LinkKind kind) noexcept;      // "carrier_down"
const char* sourceName(LinkSource src) noexcept;   // "tp_qdisc_reset"
std::optional<LinkSource> sourceFromName(std::string_view name) noexcept;

// (down_count << 32 | up_count) as carried in reccl_link_event.value -> down + up.
inline uint64_t carrierSeqFromCounts(uint64_t packed) noexcept {
  return (packed >> 32) + (packed & 0xffffffffu);
}

}  // namespace reccl::detector

namespace reccl::detector {
// The event a change of (admin, carrier) amounts to: a link is usable when admin up with
// carrier; only a change of usability is an event (NONE otherwise). Same rule as the BPF side.
inline LinkKind classifyTransition(bool oldAdmin, bool oldCarrier, bool newAdmin,
                                   bool newCarrier) noexcept {
  bool was = oldAdmin && oldCarrier;
  bool is = newAdmin && newCarrier;
  if (was == is) return RECCL_LINK_KIND_NONE;
  if (is) return oldAdmin ? RECCL_LINK_KIND_CARRIER_UP : RECCL_LINK_KIND_ADMIN_UP;
  return newAdmin ? RECCL_LINK_KIND_CARRIER_DOWN : RECCL_LINK_KIND_ADMIN_DOWN;
}
}  // namespace reccl::detector
