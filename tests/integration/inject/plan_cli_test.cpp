// Fault plans and the CLI end to end: timing accuracy, automatic undo, restore on SIGTERM,
// `clear` from another process, and bad input refused with exit 64 and nothing changed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "inject_test_util.h"
#include "reccl/inject/fault_session.h"
#include "reccl/inject/plan_runner.h"
#include "testbed_fixture.h"

using namespace reccl;
using namespace reccl::test;
using inject::Side;
using inject::Target;
using nlohmann::json;

namespace {

std::string tempPath(const std::string& stem) {
  return "/tmp/reccl-inject-" + std::to_string(::getpid()) + "-" + stem;
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::vector<json> readJsonLines(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

json target(const std::string& ns, const std::string& dev, const std::string& side = "host") {
  return {{"netns", ns}, {"dev", dev}, {"side", side}};
}

class InjectPlanTest : public TestbedTest<2, 2> {
 protected:
  void TearDown() override {
    if (!tb_) return;
    for (int h = 0; h < 2; ++h)
      for (const char* d : {"rail0", "rail1"}) (void)inject::clearTarget({netns(h), d, Side::kHost}, false);
  }
};

TEST_F(InjectPlanTest, ActionsHappenOnScheduleAndAreUndone) {
  // 200 alternating link-down/up transitions 10 ms apart on h1's rail1 switch port, plus a
  // drop window on h0's rail0 that the plan must undo on its own.
  json actions = json::array();
  actions.push_back({{"at_ms", 0}, {"action", "drop"}, {"target", target(netns(0), "rail0")},
                     {"duration_ms", 500}, {"params", {{"rate", 1.0}, {"direction", "egress"}}}});
  actions.push_back({{"at_ms", 20}, {"action", "flap"}, {"target", target(netns(1), "rail1", "switch")},
                     {"params", {{"period_ms", 20}, {"count", 100}}}});
  std::string planText = json{{"version", 1}, {"actions", actions}}.dump();
  auto plan = inject::parsePlan(planText);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();

  inject::PlanRunOptions opts;
  opts.logPath = tempPath("timing.jsonl");
  auto res = inject::runPlan(*plan, opts);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->failed, 0);
  EXPECT_TRUE(res->restoreStatus.ok()) << res->restoreStatus.ToString();
  ASSERT_EQ(res->records.size(), 202u);
  std::printf("plan timing over %zu actions (%s): lateness p50 %.1f us, p99 %.1f us, max %.1f us; "
              "done (kernel acked) p50 %.1f us, p99 %.1f us, max %.1f us\n",
              res->records.size(), res->schedPolicy.c_str(), res->lateP50Ns / 1e3,
              res->lateP99Ns / 1e3, res->lateMaxNs / 1e3, res->doneP50Ns / 1e3,
              res->doneP99Ns / 1e3, res->doneMaxNs / 1e3);
  // The 2 ms p99 goal is a performance figure: it is reported above and in docs/inject.md from a
  // quiet run, not asserted, since ctest -j runs other tests beside this one on 2 cores. What is
  // asserted is what a broken scheduler would violate: the median action starts within 2 ms and
  // the p99 stays within 50 ms (a stalled or wrong-clock runner is seconds off).
  EXPECT_LE(res->lateP50Ns, 2'000'000);
  EXPECT_LE(res->lateP99Ns, 50'000'000);

  // The log: one line per action with both clocks, scheduled vs actual, then restore and end.
  auto lines = readJsonLines(opts.logPath);
  ASSERT_GE(lines.size(), 205u);
  EXPECT_EQ(lines.front()["event"], "plan-start");
  EXPECT_EQ(lines.back()["event"], "plan-end");
  int undos = 0;
  for (const auto& l : lines) {
    if (l["event"] != "action") continue;
    EXPECT_TRUE(l["ok"].get<bool>());
    EXPECT_GE(l["start_mono_ns"].get<int64_t>(), l["scheduled_mono_ns"].get<int64_t>());
    EXPECT_EQ(l["scheduled_mono_ns"].get<int64_t>(),
              lines.front()["t0_mono_ns"].get<int64_t>() + l["at_ms"].get<int64_t>() * 1'000'000);
    EXPECT_GT(l["start_realtime_ns"].get<int64_t>(), 0);
    undos += l["undo"].get<bool>();
  }
  EXPECT_EQ(undos, 1) << "the drop's duration must produce one undo";
  ::unlink(opts.logPath.c_str());
  EXPECT_TRUE(dropProgramGone(netns(0), "rail0"));
  EXPECT_TRUE(eventually([&] { return linkRunning(netns(1), "rail1"); }));
  EXPECT_TRUE(eventually([&] { return ping(0, 1, 0, 56, 1) && ping(0, 1, 1, 56, 1); }));
}

TEST_F(InjectPlanTest, SigtermRestoresEverything) {
  json actions = json::array();
  actions.push_back({{"at_ms", 0}, {"action", "link-down"}, {"target", target(netns(0), "rail1", "switch")}});
  actions.push_back({{"at_ms", 0}, {"action", "blackhole"}, {"target", target(netns(0), "rail0")}});
  actions.push_back({{"at_ms", 60000}, {"action", "link-up"}, {"target", target(netns(0), "rail1", "switch")}});
  std::string planPath = tempPath("sigterm.json");
  writeFile(planPath, json(actions).dump());

  testbed::SpawnOptions so;
  so.argv = {RECCL_CLI_PATH, "inject", "plan", planPath, "-q"};
  so.captureStderr = true;
  auto child = testbed::spawn(so);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_TRUE(eventually([&] {
    auto l = linkInfo(fabricNetns(), "h0r1");
    return l.ok() && !l->adminUp() && inject::faultDropPinned(netns(0), "rail0");
  })) << "the plan did not inject its faults";
  EXPECT_FALSE(ping(0, 1, 0, 56, 1));
  ASSERT_EQ(::kill(child->pid, SIGTERM), 0);
  int status = 0;
  bool exited = eventually([&] { return ::waitpid(child->pid, &status, WNOHANG) == child->pid; });
  if (!exited) {
    ::kill(child->pid, SIGKILL);
    ::waitpid(child->pid, &status, 0);
  }
  ASSERT_TRUE(exited) << "plan did not stop within 5 s of SIGTERM";
  EXPECT_TRUE(WIFEXITED(status)) << "killed by the signal instead of handling it";
  EXPECT_EQ(WEXITSTATUS(status), 1);
  auto port = linkInfo(fabricNetns(), "h0r1");
  ASSERT_TRUE(port.ok());
  EXPECT_TRUE(port->adminUp()) << "switch port left down";
  EXPECT_TRUE(dropProgramGone(netns(0), "rail0")) << "drop program left behind";
  EXPECT_TRUE(eventually([&] { return ping(0, 1, 0, 56, 1) && ping(0, 1, 1, 56, 1); }));
  ::unlink(planPath.c_str());
}

TEST_F(InjectPlanTest, CliFaultsAreClearedByAnotherProcess) {
  auto d = recclCli({"inject", "drop", "--netns", netns(0), "--dev", "rail0", "--rate", "1", "--egress"});
  ASSERT_EQ(d.exitCode, 0) << d.err;
  auto l = recclCli({"inject", "link-down", "--netns", netns(0), "--dev", "rail1", "--side", "switch"});
  ASSERT_EQ(l.exitCode, 0) << l.err;
  EXPECT_FALSE(ping(0, 1, 0, 56, 1));
  EXPECT_FALSE(ping(0, 1, 1, 56, 1));
  auto s = recclCli({"inject", "stats", "--netns", netns(0), "--dev", "rail0", "--json"});
  ASSERT_EQ(s.exitCode, 0) << s.err;
  json j = json::parse(s.out);
  ASSERT_EQ(j["rules"].size(), 1u);
  EXPECT_EQ(j["rules"][0]["direction"], "egress");
  EXPECT_GT(j["rules"][0]["dropped"].get<uint64_t>(), 0u);

  for (const char* dev : {"rail0", "rail1"}) {
    auto c = recclCli({"inject", "clear", "--netns", netns(0), "--dev", dev});
    EXPECT_EQ(c.exitCode, 0) << c.err;
  }
  EXPECT_TRUE(dropProgramGone(netns(0), "rail0"));
  EXPECT_TRUE(eventually([&] { return ping(0, 1, 0, 56, 1) && ping(0, 1, 1, 56, 1); }));
  // Clearing what is already clear is fine, and its stats are an empty table, not bad input.
  EXPECT_EQ(recclCli({"inject", "clear", "--netns", netns(0), "--dev", "rail0"}).exitCode, 0);
  auto empty = recclCli({"inject", "stats", "--netns", netns(0), "--dev", "rail0", "--json"});
  ASSERT_EQ(empty.exitCode, 0) << empty.err;
  json e = json::parse(empty.out);
  EXPECT_EQ(e["rules"].size(), 0u) << empty.out;
  EXPECT_EQ(e["ingress"]["dropped"], 0u) << empty.out;
}

TEST_F(InjectPlanTest, BadInputExits64AndChangesNothing) {
  std::string ns = netns(0);
  struct Case {
    std::vector<std::string> args;
    const char* expect;
  } cases[] = {
      {{"inject", "link-down", "--netns", "reccl-no-such-ns", "--dev", "rail0"}, "does not exist"},
      {{"inject", "link-down", "--netns", ns, "--dev", "rail7"}, "does not exist"},
      {{"inject", "link-down", "--netns", ns, "--dev", "mgmt0"}, "management"},
      {{"inject", "link-down", "--netns", ns, "--dev", "mgmt0", "--side", "switch"}, "management"},
      {{"inject", "link-down", "--netns", "", "--dev", "lo"}, "root network namespace"},
      {{"inject", "link-down", "--netns", ns, "--dev", "rail0", "--side", "left"}, "side"},
      {{"inject", "drop", "--netns", ns, "--dev", "rail0", "--rate", "1.5"}, "rate must be in [0,1]"},
      {{"inject", "drop", "--netns", ns, "--dev", "rail0", "--rate", "-0.1"}, "rate"},
      {{"inject", "drop", "--netns", ns, "--dev", "rail0", "--rate", "0.1", "--flow", "udp:1:2"}, "flow"},
      {{"inject", "carrier-off", "--netns", ns, "--dev", "rail0"}, "tap"},
      {{"inject", "flap", "--netns", ns, "--dev", "rail0", "--period", "10", "--count", "0"}, "count"},
      {{"inject", "plan", "/nonexistent/plan.json"}, "cannot be read"},
      {{"inject", "bogus"}, ""},
  };
  for (const auto& c : cases) {
    auto r = recclCli(c.args);
    std::string cmd;
    for (const auto& a : c.args) cmd += a + " ";
    EXPECT_EQ(r.exitCode, 64) << cmd << "-> " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << cmd << "-> " << r.err;
    EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one-line error: " << r.err;
  }
  // A plan whose second entry names an unknown device changes nothing, not even the first.
  json actions = json::array();
  actions.push_back({{"at_ms", 0}, {"action", "link-down"}, {"target", target(ns, "rail0")}});
  actions.push_back({{"at_ms", 0}, {"action", "drop"}, {"target", target(ns, "rail1")},
                     {"params", {{"rate", 0.5}}}});
  actions.push_back({{"at_ms", 10}, {"action", "link-down"}, {"target", target(ns, "nope0")}});
  std::string planPath = tempPath("bad.json");
  writeFile(planPath, json(actions).dump());
  auto r = recclCli({"inject", "plan", planPath});
  EXPECT_EQ(r.exitCode, 64) << r.err;
  EXPECT_NE(r.err.find("nope0"), std::string::npos) << r.err;
  writeFile(planPath, R"([{"at_ms":0,"action":"drop","target":{"netns":")" + ns +
                          R"(","dev":"rail0"},"params":{"rate":2}}])");
  r = recclCli({"inject", "plan", planPath});
  EXPECT_EQ(r.exitCode, 64);
  EXPECT_NE(r.err.find("actions[0].params.rate"), std::string::npos) << r.err;
  writeFile(planPath, "{ not json");
  EXPECT_EQ(recclCli({"inject", "plan", planPath}).exitCode, 64);
  ::unlink(planPath.c_str());

  EXPECT_TRUE(linkRunning(ns, "rail0"));
  EXPECT_TRUE(linkRunning(ns, "mgmt0"));
  EXPECT_FALSE(inject::faultDropPinned(ns, "rail0"));
  EXPECT_FALSE(inject::faultDropPinned(ns, "rail1"));
  EXPECT_TRUE(ping(0, 1, 0, 56, 2));
}

}  // namespace

namespace {

// A log that cannot be written (a full disk) is a failure, said; the faults still ran and were
// undone.
TEST_F(InjectPlanTest, CliFlapWithAnUnwritableLogFails) {
  auto r = recclCli({"inject", "flap", "--netns", netns(1), "--dev", "rail0", "--side", "switch",
                     "--period", "30", "--count", "2", "--log", "/dev/full"});
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("write log /dev/full"), std::string::npos) << r.err;
  auto port = linkInfo(fabricNetns(), "h1r0");
  ASSERT_TRUE(port.ok());
  EXPECT_TRUE(port->adminUp());
}

TEST_F(InjectPlanTest, CliFlapAlternatesAndEndsUp) {
  std::string log = tempPath("flap.jsonl");
  auto r = recclCli({"inject", "flap", "--netns", netns(1), "--dev", "rail0", "--side", "switch",
                     "--period", "30", "--count", "5", "--jitter", "3", "--log", log});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("10 actions run, 0 failed"), std::string::npos) << r.out;
  auto lines = readJsonLines(log);
  std::vector<std::string> kinds;
  int64_t t0 = 0;
  for (const auto& l : lines) {
    if (l["event"] == "plan-start") t0 = l["t0_mono_ns"].get<int64_t>();
    if (l["event"] != "action") continue;
    kinds.push_back(l["action"].get<std::string>());
    EXPECT_EQ(l["device"], fabricNetns() + "/h1r0");
    // Jitter keeps each transition within 3 ms of its nominal slot (15 ms apart).
    int64_t at = l["at_ms"].get<int64_t>();
    int64_t nominal = (static_cast<int64_t>(kinds.size()) - 1) * 15;
    EXPECT_LE(std::abs(at - nominal), 3) << l.dump();
    EXPECT_EQ(l["scheduled_mono_ns"].get<int64_t>(), t0 + at * 1'000'000);
  }
  ASSERT_EQ(kinds.size(), 10u);
  for (size_t i = 0; i < kinds.size(); ++i) EXPECT_EQ(kinds[i], i % 2 ? "link-up" : "link-down");
  ::unlink(log.c_str());
  auto port = linkInfo(fabricNetns(), "h1r0");
  ASSERT_TRUE(port.ok());
  EXPECT_TRUE(port->adminUp());
  EXPECT_TRUE(eventually([&] { return ping(0, 1, 0, 56, 1); }));
}

}  // namespace

namespace {

TEST_F(InjectPlanTest, PlanPutsBackWhatWasThereBefore) {
  // A rule someone set up before the plan (rate 0 on one flow) must survive the plan, even
  // though the plan changes that very rule and clears the device in between.
  Target t{netns(0), "rail0", Side::kHost};
  inject::DropRule before;
  before.dirs = inject::kEgress;
  before.rate = 0.0;
  before.flow = inject::parseFlow("udp:*:*:*:6001").value();
  auto slot = inject::injectDrop(t, before, false);
  ASSERT_TRUE(slot.ok()) << slot.status().ToString();

  json actions = json::array();
  actions.push_back({{"at_ms", 0}, {"action", "drop"}, {"target", target(netns(0), "rail0")},
                     {"duration_ms", 50},
                     {"params", {{"rate", 1.0}, {"direction", "egress"}, {"flow", "udp:*:*:*:6001"}}}});
  actions.push_back({{"at_ms", 100}, {"action", "clear"}, {"target", target(netns(0), "rail0")}});
  actions.push_back({{"at_ms", 150}, {"action", "link-down"}, {"target", target(netns(0), "rail0")},
                     {"duration_ms", 20}});
  actions.push_back({{"at_ms", 200}, {"action", "link-down"}, {"target", target(netns(0), "rail1")}});
  auto plan = inject::parsePlan(json(actions).dump());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto res = inject::runPlan(*plan, inject::PlanRunOptions{});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->failed, 0);
  EXPECT_TRUE(res->restoreStatus.ok()) << res->restoreStatus.ToString();

  auto stats = inject::readDropStats(t, false);
  ASSERT_TRUE(stats.ok()) << "the earlier drop program is gone: " << stats.status().ToString();
  ASSERT_EQ(stats->rules.size(), 1u);
  EXPECT_EQ(stats->rules[0].slot, *slot);
  EXPECT_DOUBLE_EQ(stats->rules[0].rule.rate, 0.0);
  EXPECT_TRUE(stats->rules[0].rule.sameMatch(before));
  EXPECT_TRUE(linkRunning(netns(0), "rail0"));
  EXPECT_TRUE(eventually([&] { return linkRunning(netns(0), "rail1"); }))
      << "a link-down without duration must be undone when the plan ends";
}

}  // namespace
