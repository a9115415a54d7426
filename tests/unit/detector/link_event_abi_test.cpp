// The BPF/userspace event ABI: sizes and offsets are what both sides compiled against.
#include <gtest/gtest.h>

#include <cstddef>

#include "reccl/detector/link_signal.h"
#include "reccl_bpf/link_event.h"

namespace reccl::detector {
namespace {

TEST(LinkEventAbi, LayoutIsFixed) {
  EXPECT_EQ(sizeof(reccl_link_event), 64u);
  EXPECT_EQ(offsetof(reccl_link_event, abi_version), 0u);
  EXPECT_EQ(offsetof(reccl_link_event, kind), 2u);
  EXPECT_EQ(offsetof(reccl_link_event, size), 4u);
  EXPECT_EQ(offsetof(reccl_link_event, ts_ns), 8u);
  EXPECT_EQ(offsetof(reccl_link_event, netns_ino), 16u);
  EXPECT_EQ(offsetof(reccl_link_event, ifindex), 20u);
  EXPECT_EQ(offsetof(reccl_link_event, value), 32u);
  EXPECT_EQ(offsetof(reccl_link_event, ifname), 40u);
  EXPECT_EQ(sizeof(reccl_link_slot), 64u) << "one cache line per link";
  EXPECT_EQ(offsetof(reccl_link_slot, epoch), 0u);
  EXPECT_EQ(sizeof(reccl_link_key), 8u);
}

TEST(LinkEventAbi, EveryKindAndSourceHasAName) {
  for (int k = 0; k < RECCL_LINK_KIND_COUNT; ++k)
    EXPECT_STRNE(kindName(static_cast<LinkKind>(k)), "unknown") << k;
  for (int s = 0; s < RECCL_LINK_SRC_COUNT; ++s) {
    const char* n = sourceName(static_cast<LinkSource>(s));
    EXPECT_STRNE(n, "unknown") << s;
    if (s > 0) {
      EXPECT_EQ(sourceFromName(n), static_cast<LinkSource>(s));
    }
  }
  EXPECT_FALSE(sourceFromName("kprobe"));
}

TEST(LinkEventAbi, CarrierCountsPackIntoOneSequence) {
  uint64_t packed = (uint64_t(7) << 32) | 9;
  EXPECT_EQ(carrierSeqFromCounts(packed), 16u);
}

TEST(LinkEventAbi, DirectionOfEveryKind) {
  EXPECT_EQ(directionOf(RECCL_LINK_KIND_CARRIER_DOWN), Direction::kDown);
  EXPECT_EQ(directionOf(RECCL_LINK_KIND_RDMA_DEVICE_FATAL), Direction::kDown);
  EXPECT_EQ(directionOf(RECCL_LINK_KIND_RDMA_PORT_ACTIVE), Direction::kUp);
  EXPECT_EQ(directionOf(RECCL_LINK_KIND_TX_TIMEOUT), Direction::kDegraded);
  EXPECT_EQ(directionOf(RECCL_LINK_KIND_LINKWATCH_SCHEDULED), Direction::kNone);
}

}  // namespace
}  // namespace reccl::detector
