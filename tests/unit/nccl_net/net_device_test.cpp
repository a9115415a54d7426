// The devices the NCCL net plugin offers over a host's NICs (nccl_net/src/net_device.h), as a
// table: names, speeds, PCI paths and home NICs, one per NIC or one fused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net_device.h"

namespace reccl::nccl_net {
namespace {

const std::vector<NicFacts> kNics = {
    {"rail0", 25000, "/sys/devices/pci0000:00/0000:00:03.0"}, {"rail1", 10000, ""}, {"rail2", 100000, "/sys/x"}};

TEST(NcclNetDevices, OnePerNicStartingOnItsNic) {
  auto ds = devicesOver(kNics, false);
  ASSERT_EQ(ds.size(), 3u);
  for (size_t i = 0; i < ds.size(); ++i) {
    EXPECT_EQ(ds[i].name, "reccl:" + kNics[i].name);
    EXPECT_EQ(ds[i].homeNic, kNics[i].name);
    EXPECT_EQ(ds[i].speedMbps, kNics[i].speedMbps);
    EXPECT_EQ(ds[i].pciPath, kNics[i].pciPath);
  }
}

TEST(NcclNetDevices, OneFusedOverEveryNic) {
  auto ds = devicesOver(kNics, true);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].name, "reccl:rail0+rail1+rail2");
  EXPECT_EQ(ds[0].homeNic, "");
  EXPECT_EQ(ds[0].speedMbps, 135000);
  EXPECT_EQ(ds[0].pciPath, kNics[0].pciPath);
}

TEST(NcclNetDevices, NoNicsNoDevices) {
  EXPECT_TRUE(devicesOver({}, false).empty());
  EXPECT_TRUE(devicesOver({}, true).empty());
}

TEST(NcclNetDevices, SpeedFromSysfsTextVirtualNicsCountTenGigabit) {
  EXPECT_EQ(nicSpeedMbps("25000\n"), 25000);
  EXPECT_EQ(nicSpeedMbps("-1\n"), 10000);  // veth, tap
  EXPECT_EQ(nicSpeedMbps(""), 10000);
  EXPECT_EQ(nicSpeedMbps("fast"), 10000);
  EXPECT_EQ(nicSpeedMbps("99999999999"), 10000);
}

}  // namespace
}  // namespace reccl::nccl_net
