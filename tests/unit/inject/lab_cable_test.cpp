// How carrier actions reach a device (lab_cable.h): a tap's carrier anywhere, a lab VM's cable
// only for a virtio NIC in the VM's root namespace with RECCL_TEST_LAB set; anything else is
// refused with the device named and what is needed. The lab's plan file parses.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <ostream>
#include <string>

#include "reccl/inject/fault_plan.h"
#include "reccl/inject/lab_cable.h"

using namespace reccl;
using namespace reccl::inject;

namespace {

struct Case {
  const char* name;
  ResolvedTarget target;
  bool inLab;
  const char* driver;
  std::optional<CarrierControl> want;  // nullopt: refused
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class CarrierControlFor : public ::testing::TestWithParam<Case> {};

TEST_P(CarrierControlFor, PicksTheRouteOrRefusesNamingTheDevice) {
  const Case& c = GetParam();
  auto got = carrierControlFor(c.target, c.inLab, c.driver);
  if (c.want) {
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, *c.want);
    return;
  }
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Errc::kInvalidArgument);
  EXPECT_NE(got.status().message().find(c.target.toString()), std::string::npos) << got.status().message();
  // Outside the lab the message says what carrier actions need, the lab included.
  if (!c.inLab) {
    EXPECT_NE(got.status().message().find("RECCL_TEST_LAB=1"), std::string::npos) << got.status().message();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, CarrierControlFor,
    ::testing::Values(
        Case{"TapOutsideLab", {"tb-h0", "rail0", "tun", 3}, false, "", CarrierControl::kTap},
        Case{"TapInLab", {"tb-h0", "rail0", "tap", 3}, true, "", CarrierControl::kTap},
        Case{"VirtioInLabRootNetns", {"", "rail0", "", 3}, true, "virtio_net", CarrierControl::kLabCable},
        Case{"VirtioOutsideLab", {"", "rail0", "", 3}, false, "virtio_net", std::nullopt},
        Case{"VethOutsideLab", {"tb-h0", "rail0", "veth", 3}, false, "", std::nullopt},
        Case{"VethInLab", {"", "veth0", "veth", 3}, true, "", std::nullopt},
        Case{"VirtioInLabNamedNetns", {"lab-ns", "rail0", "", 3}, true, "virtio_net", std::nullopt},
        Case{"OtherDriverInLab", {"", "eth1", "", 3}, true, "e1000", std::nullopt},
        Case{"NoDriverInLab", {"", "lo", "", 1}, true, "", std::nullopt}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// The environment-reading form on this machine's loopback (no driver): refused both ways.
TEST(CarrierControl, LoopbackIsRefusedInAndOutsideTheLab) {
  const char* old = std::getenv("RECCL_TEST_LAB");
  const std::string saved = old ? old : "";
  ResolvedTarget lo{"", "lo", "", 1};
  unsetenv("RECCL_TEST_LAB");
  auto outside = carrierControl(lo);
  setenv("RECCL_TEST_LAB", "1", 1);
  auto inside = carrierControl(lo);
  if (old) setenv("RECCL_TEST_LAB", saved.c_str(), 1);
  else unsetenv("RECCL_TEST_LAB");
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), Errc::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("RECCL_TEST_LAB=1"), std::string::npos) << outside.status().message();
  ASSERT_FALSE(inside.ok());
  EXPECT_EQ(inside.status().code(), Errc::kInvalidArgument);
}

// tools/lab/verbs_plan.json (lab.VerbsBenchFaultPlan): the lab VM's own rails, named in its root
// namespace; a cable pull, then a link-down on the other rail, each undone by the plan.
TEST(LabPlan, VerbsPlanParsesToACablePullAndALaterLinkDown) {
  auto p = loadPlanFile(RECCL_LAB_PLAN_PATH);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->actions.size(), 2u);
  EXPECT_EQ(p->actions[0].kind, ActionKind::kCarrierOff);
  EXPECT_EQ(p->actions[0].target.netns, "");
  EXPECT_EQ(p->actions[0].target.dev, "rail0");
  EXPECT_GT(p->actions[0].durationMs, 0);
  EXPECT_EQ(p->actions[1].kind, ActionKind::kLinkDown);
  EXPECT_EQ(p->actions[1].target.dev, "rail1");
  EXPECT_GT(p->actions[1].durationMs, 0);
  EXPECT_GT(p->actions[1].atMs, p->actions[0].atMs + p->actions[0].durationMs) << "the faults overlap";
}

}  // namespace
