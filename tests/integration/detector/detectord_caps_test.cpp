// reccl-detectord under exactly what its systemd unit grants: the capability set read from the
// unit file this build installs, a non-root user, no new privileges. Every hook active when the
// daemon runs as root must be active there too, and a link in a job's namespace must be watched
// and reported. The unit's LimitRTPRIO= must put the detector thread on SCHED_FIFO.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "daemon_process.h"
#include "reccl/detector/detector_client.h"
#include "veth_lab.h"

namespace reccl::detector {
namespace {

using testing::DaemonLaunch;
using testing::DaemonProcess;

constexpr uid_t kUser = 65534;  // the unit's DynamicUser= stands in as nobody

// `Key=` values of the unit (the last assignment of each key; the unit sets each once).
std::map<std::string, std::string> unitSettings() {
  std::map<std::string, std::string> kv;
  std::ifstream f(RECCL_DETECTORD_UNIT);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#' || line[0] == '[') continue;
    auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

// "CAP_BPF CAP_SYSLOG" -> "-all,+bpf,+syslog" (setpriv's syntax).
std::string setprivCaps(const std::string& unitCaps) {
  std::istringstream in(unitCaps);
  std::string cap, out = "-all";
  while (in >> cap) {
    std::transform(cap.begin(), cap.end(), cap.begin(), [](unsigned char c) { return std::tolower(c); });
    out += ",+" + cap.substr(4);
  }
  return out;
}

DaemonLaunch unitLaunch(const std::map<std::string, std::string>& unit, bool withRtLimit) {
  std::string caps = setprivCaps(unit.at("AmbientCapabilities"));
  DaemonLaunch l;
  if (withRtLimit) l.prefix = {"prlimit", "--rtprio=" + unit.at("LimitRTPRIO")};
  for (const auto& a : {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--no-new-privs"})
    l.prefix.push_back(a);
  l.prefix.push_back("--inh-caps=" + caps);
  l.prefix.push_back("--ambient-caps=" + caps);
  l.prefix.push_back("--bounding-set=" + caps);
  l.dirOwner = kUser;
  return l;
}

std::set<std::string> activeSources(const DaemonProcess& d) {
  std::set<std::string> out;
  auto j = d.startedLine();
  if (j.is_object())
    for (const auto& s : j["sources"])
      if (s.value("active", false)) out.insert(s.value("name", ""));
  return out;
}

std::string procStatus(pid_t pid, const std::string& key) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key + ":", 0) == 0) return line.substr(key.size() + 1);
  return "";
}

class DetectordUnitCaps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: BPF as the reference, setpriv to drop to the unit's set";
    if (std::system("command -v setpriv >/dev/null 2>&1") != 0) GTEST_SKIP() << "setpriv (util-linux) not installed";
    unit_ = unitSettings();
    ASSERT_TRUE(unit_.count("AmbientCapabilities")) << "unit " << RECCL_DETECTORD_UNIT << " has no AmbientCapabilities=";
    ASSERT_EQ(unit_["AmbientCapabilities"], unit_["CapabilityBoundingSet"]) << "ambient and bounding sets differ";
    ASSERT_TRUE(unit_.count("LimitRTPRIO"));
  }
  std::map<std::string, std::string> unit_;
};

TEST_F(DetectordUnitCaps, EveryHookActiveUnderRootIsActiveUnderTheUnitsCapabilities) {
  std::set<std::string> asRoot;
  {
    DaemonProcess root({"--metrics-port", "-1"});
    ASSERT_NE(root.waitStarted(30000), 0) << root.logText();
    asRoot = activeSources(root);
  }
  bool anyBpf = std::any_of(asRoot.begin(), asRoot.end(), [](const std::string& s) { return s != "rtnetlink"; });
  if (!anyBpf) GTEST_SKIP() << "no BPF hook works here even as root";

  testing::VethLab lab("cp", 1);
  ASSERT_TRUE(lab.ok());
  DaemonProcess daemon({"--metrics-port", "-1", "--hold-down-ms", "100"}, unitLaunch(unit_, false));
  ASSERT_NE(daemon.waitStarted(30000), 0) << daemon.logText();
  // The harness did what the unit does: that user, exactly those capabilities.
  EXPECT_EQ(procStatus(daemon.pid(), "Uid").substr(0, 6), "\t65534") << procStatus(daemon.pid(), "Uid");
  EXPECT_EQ(procStatus(daemon.pid(), "CapEff"), procStatus(daemon.pid(), "CapBnd"));
  EXPECT_EQ(procStatus(daemon.pid(), "NoNewPrivs"), "\t1");
  std::set<std::string> asUnit = activeSources(daemon);
  for (const auto& s : asRoot) EXPECT_TRUE(asUnit.count(s)) << s << " is active as root, not under the unit's set";
  std::printf("hooks active as root and under %s: %zu of %zu\n", unit_["AmbientCapabilities"].c_str(),
              static_cast<size_t>(std::count_if(asRoot.begin(), asRoot.end(), [&](auto& s) { return asUnit.count(s) > 0; })),
              asRoot.size());

  // A job's link in its own namespace: entered (setns), queried and reported under that set.
  auto c = DetectorClient::connect(daemon.socket());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto w = c.value()->watch({lab.hostNs(), "eth0"});
  ASSERT_TRUE(w.ok()) << w.status().ToString() << "\n" << daemon.logText();
  EXPECT_EQ(w->key.netnsIno, lab.hostIno());
  lab.settle();
  ASSERT_TRUE(lab.switchPort(0, false));
  std::vector<LinkEvent> got;
  for (Deadline dl = Deadline::afterMs(10000); got.empty() && !dl.expired();)
    if (!c.value()->receive(dl.remainingMsForPoll(), &got).ok()) break;
  ASSERT_FALSE(got.empty()) << "no event for a link in a job's namespace under the unit's set\n" << daemon.logText();
  EXPECT_EQ(got[0].type, LinkEventType::kLinkDown);
  EXPECT_EQ(got[0].link, w->key);
}

// The unit gives the detector thread its SCHED_FIFO priority through LimitRTPRIO= rather than
// CAP_SYS_NICE (which would let the daemon reprioritize every process).
TEST_F(DetectordUnitCaps, TheDetectorThreadIsRealtimeUnderTheUnitsLimit) {
  rlimit want{};
  want.rlim_cur = want.rlim_max = std::stoul(unit_["LimitRTPRIO"]);
  pid_t probe = fork();
  if (probe == 0) _exit(setrlimit(RLIMIT_RTPRIO, &want) == 0 ? 0 : 1);
  int status = 0;
  waitpid(probe, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    GTEST_SKIP() << "cannot raise RLIMIT_RTPRIO to " << want.rlim_max
                 << " here (this root lacks CAP_SYS_RESOURCE; systemd sets it before dropping privileges)";
  DaemonProcess daemon({"--metrics-port", "-1", "--source", "netlink"}, unitLaunch(unit_, true));
  ASSERT_NE(daemon.waitStarted(30000), 0) << daemon.logText();
  std::string policy;
  for (Deadline dl = Deadline::afterMs(5000); policy.empty() && !dl.expired(); usleep(10000)) {
    std::string out;
    FILE* p = popen(("ps -L -o comm=,cls= -p " + std::to_string(daemon.pid())).c_str(), "r");
    char buf[256];
    while (p && fgets(buf, sizeof(buf), p)) out += buf;
    if (p) pclose(p);
    std::istringstream in(out);
    std::string comm, cls;
    while (in >> comm >> cls)
      if (comm == "reccl-detector") policy = cls;
  }
  EXPECT_EQ(policy, "FF") << daemon.logText();
}

}  // namespace
}  // namespace reccl::detector
