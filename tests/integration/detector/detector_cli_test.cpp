// `reccl detector watch` end to end: events printed as JSON lines; bad input exits 64.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "veth_lab.h"

namespace reccl::detector {
namespace {

std::string runCapture(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int st = pclose(p);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST(DetectorCli, WatchPrintsLinkDownAsJson) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: BPF and network namespaces";
  testing::VethLab lab("cli", 1);
  ASSERT_TRUE(lab.ok());
  lab.settle();
  std::string cmd = std::string(RECCL_CLI_PATH) + " detector watch --json --netns " + lab.hostNs() +
                    " --dev eth0 --duration 2.5";
  // Take the rail down once the watcher is surely up (BPF probing takes a few hundred ms).
  pid_t pid = fork();
  if (pid == 0) {
    usleep(1'500'000);
    _exit(lab.switchPort(0, false) ? 0 : 1);
  }
  int rc = -1;
  std::string out = runCapture(cmd, &rc);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"type\":\"link_down\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"ifname\":\"eth0\""), std::string::npos) << out;
  EXPECT_NE(out.find("active sources"), std::string::npos) << "active sources not reported";
}

TEST(DetectorCli, BadInputIsRefusedWithUsageExit) {
  int rc = -1;
  std::string out = runCapture(std::string(RECCL_CLI_PATH) + " detector watch --netns rdt-no-such-ns --dev eth0", &rc);
  EXPECT_EQ(rc, 64) << out;
  EXPECT_NE(out.find("rdt-no-such-ns"), std::string::npos) << out;
  out = runCapture(std::string(RECCL_CLI_PATH) + " detector watch --source kprobe", &rc);
  EXPECT_EQ(rc, 64) << out;
  EXPECT_NE(out.find("source"), std::string::npos) << out;
  out = runCapture(std::string(RECCL_CLI_PATH) + " detector status --socket /tmp/rdt-none.sock", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("no daemon"), std::string::npos) << out;
}

}  // namespace
}  // namespace reccl::detector
