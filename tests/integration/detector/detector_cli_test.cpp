// `reccl detector watch` end to end: events printed as JSON lines; bad input exits 64.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "reccl/detector/daemon_protocol.h"
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

// Runs `argv` with stdout and stderr on one pipe. Once a line containing `readyMark` appears,
// calls `onReady` once. Returns everything the child printed; *rc is its exit code, or -1 when it
// had to be killed at `deadline`.
std::string runWhenReady(const std::vector<std::string>& argv, const std::string& readyMark,
                         const std::function<void()>& onReady, std::chrono::seconds deadline, int* rc) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "pipe: " + std::string(strerror(errno));
  pid_t child = fork();
  if (child == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  bool ready = false;
  auto end = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (!ready && out.find(readyMark) != std::string::npos) {
      ready = true;
      onReady();
    }
  }
  close(fds[0]);
  int st = 0;
  pid_t done = 0;
  while ((done = waitpid(child, &st, WNOHANG)) == 0 && std::chrono::steady_clock::now() < end) usleep(10'000);
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &st, 0);
    *rc = -1;
    return out + "\n(killed at the deadline)";
  }
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST(DetectorCli, WatchPrintsLinkDownAsJson) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: BPF and network namespaces";
  testing::VethLab lab("cli", 1);
  ASSERT_TRUE(lab.ok());
  lab.settle();
  // The watcher prints "watching N links" once its sources run; the rail goes down only then,
  // and --count 1 makes it exit after the first event (the deadlines only bound a broken run).
  bool downOk = false;
  int rc = -2;
  std::string out = runWhenReady(
      {RECCL_CLI_PATH, "detector", "watch", "--json", "--netns", lab.hostNs(), "--dev", "eth0", "--count", "1",
       "--duration", "30"},
      "watching 1 links", [&] { downOk = lab.switchPort(0, false); }, std::chrono::seconds(40), &rc);
  EXPECT_TRUE(downOk) << "could not take the switch port down";
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
  out = runCapture(std::string(RECCL_CLI_PATH) + " detector watch --count 0", &rc);
  EXPECT_EQ(rc, 64) << out;
  EXPECT_NE(out.find("count"), std::string::npos) << out;
  out = runCapture(std::string(RECCL_CLI_PATH) + " detector watch --source kprobe", &rc);
  EXPECT_EQ(rc, 64) << out;
  EXPECT_NE(out.find("source"), std::string::npos) << out;
  // A RECCL_* value outside its range is named with the range, as at a communicator's init.
  out = runCapture("RECCL_HOLDDOWN_MS=-5 " + std::string(RECCL_CLI_PATH) + " detector watch --dev eth0 --count 1", &rc);
  EXPECT_EQ(rc, 64) << out;
  EXPECT_NE(out.find("RECCL_HOLDDOWN_MS"), std::string::npos) << out;
  EXPECT_NE(out.find("-5"), std::string::npos) << out;
  out = runCapture("RECCL_RETRANS_RATE=lots " + std::string(RECCL_CLI_PATH) + " detector status",
                   &rc);
  EXPECT_EQ(rc, 64) << out;
  EXPECT_NE(out.find("RECCL_RETRANS_RATE"), std::string::npos) << out;
  out = runCapture(std::string(RECCL_CLI_PATH) + " detector status --socket /tmp/rdt-none.sock", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("no daemon"), std::string::npos) << out;
  // Numbers the watch would turn into a run without end, or into an overflowing deadline.
  for (const char* bad : {"--duration -1", "--duration nan", "--duration inf", "--duration 1e300",
                          "--hold-down-ms -1"}) {
    out = runCapture("timeout 20 " + std::string(RECCL_CLI_PATH) + " detector watch --source netlink " + bad, &rc);
    EXPECT_EQ(rc, 64) << bad << ": " << out;
    EXPECT_NE(out.find(std::string(bad).substr(0, std::string(bad).find(' '))), std::string::npos) << out;
  }
  out = runCapture(std::string(RECCL_CLI_PATH) + " detector status --socket ''", &rc);
  EXPECT_EQ(rc, 64) << out;
  out = runCapture(std::string(RECCL_CLI_PATH) + " detector status --socket /tmp/" + std::string(200, 'a'), &rc);
  EXPECT_EQ(rc, 64) << out;
}

// Every level of `reccl` names a word that is not one of its subcommands, and lists them; a
// stray word beside a subcommand is refused before the subcommand runs.
TEST(RecclCli, AnUnknownOrMissingSubcommandIsNamedWithTheChoices) {
  struct Case {
    const char* args;
    const char* said;
  };
  for (const Case& c : {Case{" bogus", "reccl: unknown subcommand 'bogus' (want params, testbed, inject or detector)"},
                        Case{"", "reccl: missing subcommand (want params, testbed, inject or detector)"},
                        Case{" inject bogus", "reccl: inject: unknown subcommand 'bogus' (want link-down, "},
                        Case{" inject", "reccl: inject: missing subcommand (want link-down, "},
                        Case{" detector bogus", "reccl: detector: unknown subcommand 'bogus' (want watch or status)"},
                        Case{" testbed bogus --name x", "reccl: testbed: unknown subcommand 'bogus' (want up, down, exec"},
                        Case{" bogus params", "reccl: unknown subcommand 'bogus'"},
                        Case{" detector foo status --socket /nonexistent", "reccl: detector: unknown subcommand 'foo'"}}) {
    int rc = -1;
    std::string out = runCapture(std::string(RECCL_CLI_PATH) + c.args, &rc);
    EXPECT_EQ(rc, 64) << c.args << ": " << out;
    EXPECT_NE(out.find(c.said), std::string::npos) << c.args << ": " << out;
  }
}

// A daemon's status reply whose fields have other types than the daemon's own is a failure with
// a message (exit 1), not an abort of the CLI.
TEST(DetectorCli, StatusOfAMalformedReplyFailsCleanly) {
  const std::string path = "/tmp/rdt-fake-" + std::to_string(getpid()) + ".sock";
  int srv = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_GE(srv, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size());
  unlink(path.c_str());
  ASSERT_EQ(bind(srv, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(srv, 4), 0);
  const std::string version = std::to_string(kDaemonProtocolVersion);
  const std::string hello = R"({"op":"hello","version":)" + version + "}";
  for (const std::string& reply : {R"({"op":"status","version":)" + version + R"(,"mode":5})",
                                   R"({"op":"status","version":)" + version + R"(,"sources":[1]})",
                                   R"({"op":"status","version":)" + version + R"(,"links":{"a":1}})"}) {
    // One client at a time: hello, then the status request, each answered.
    std::thread fake([&] {
      int c = accept4(srv, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      char buf[4096];
      for (const std::string& answer : {hello, reply}) {
        pollfd p{c, POLLIN, 0};
        if (poll(&p, 1, 10000) <= 0 || recv(c, buf, sizeof(buf), 0) <= 0) break;
        if (send(c, answer.data(), answer.size(), MSG_NOSIGNAL) < 0) break;
      }
      recv(c, buf, sizeof(buf), 0);  // until the CLI closes
      close(c);
    });
    int rc = -1;
    std::string out = runCapture("timeout 20 " + std::string(RECCL_CLI_PATH) + " detector status --socket " + path, &rc);
    fake.join();
    EXPECT_EQ(rc, 1) << reply << ": " << out;
    EXPECT_NE(out.find("malformed reply"), std::string::npos) << out;
  }
  close(srv);
  unlink(path.c_str());
}

}  // namespace
}  // namespace reccl::detector
