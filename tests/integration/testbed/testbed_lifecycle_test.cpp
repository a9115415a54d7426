// Testbed life cycle through the library and the `reccl testbed` CLI: teardown leaves nothing,
// parallel testbeds do not collide, bad input is refused with nothing half-created, and `run`
// gives every rank its environment and returns the right exit code.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>
#include <thread>

#include "reccl/common/deadline.h"
#include "reccl/netlink/link.h"
#include "reccl/netlink/netns.h"
#include "reccl/netlink/nl_socket.h"
#include "testbed_fixture.h"

namespace {

using reccl::test::CapturedRun;
using reccl::test::ScopedTestbed;
using reccl::testbed::Testbed;
using reccl::testbed::TestbedSpec;

const char* kCli = RECCL_CLI_PATH;

CapturedRun cli(const std::vector<std::string>& args,
                std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  std::vector<std::string> argv{kCli};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = reccl::testbed::runCaptured("", argv, timeout);
  if (!r.ok()) {
    CapturedRun f;
    f.err = r.status().ToString();
    return f;
  }
  return *r;
}

// Every trace of a testbed name: its namespaces and its state file.
std::vector<std::string> tracesOf(const std::string& name) {
  std::vector<std::string> t;
  for (const std::string& n : reccl::netlink::listNetns()) {
    if (n == name + "-fab" || reccl::testbed::hostIndexOfNetns(name, n) >= 0) t.push_back(n);
  }
  struct stat st{};
  if (stat(reccl::testbed::statePath(name).c_str(), &st) == 0) t.push_back("state file");
  return t;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + " ";
  return s;
}

class TestbedLifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = reccl::test::testbedSkipReason();
    if (!why.empty()) GTEST_SKIP() << why;
  }
};

TEST_F(TestbedLifecycle, DownLeavesNoNamespaceBehindAndIsIdempotent) {
  const std::string name = reccl::test::uniqueTestbedName();
  int guardPid = -1;
  int guard = reccl::test::startTeardownGuard(name, &guardPid);
  auto up = cli({"testbed", "up", "--name", name, "--hosts", "3", "--rails", "2"});
  ASSERT_EQ(up.exitCode, 0) << up.err;
  EXPECT_EQ(tracesOf(name).size(), 5u) << join(tracesOf(name));  // 3 hosts + fabric + state
  auto ipList = reccl::testbed::runCaptured("", {"ip", "netns", "list"}, std::chrono::seconds(5));
  ASSERT_TRUE(ipList.ok());
  EXPECT_NE(ipList->out.find(name + "-h2"), std::string::npos) << "ip netns does not see it";

  // A process left running inside a host must not keep it alive.
  reccl::testbed::SpawnOptions so;
  so.netns = name + "-h1";
  so.argv = {"sleep", "60"};
  so.dieWithParent = false;
  auto sleeper = reccl::testbed::spawn(so);
  ASSERT_TRUE(sleeper.ok()) << sleeper.status().ToString();

  auto down = cli({"testbed", "down", "--name", name});
  EXPECT_EQ(down.exitCode, 0) << down.err;
  EXPECT_NE(down.out.find("removed netns " + name + "-h2"), std::string::npos) << down.out;
  EXPECT_NE(down.out.find("(sleep)"), std::string::npos) << down.out;
  int ws = 0;
  ASSERT_EQ(waitpid(sleeper->pid, &ws, 0), sleeper->pid);
  EXPECT_TRUE(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
  EXPECT_TRUE(tracesOf(name).empty()) << join(tracesOf(name));
  ipList = reccl::testbed::runCaptured("", {"ip", "netns", "list"}, std::chrono::seconds(5));
  ASSERT_TRUE(ipList.ok());
  EXPECT_EQ(ipList->out.find(name + "-"), std::string::npos) << ipList->out;

  auto again = cli({"testbed", "down", "--name", name});
  EXPECT_EQ(again.exitCode, 0) << again.err;
  EXPECT_NE(again.out.find("nothing to remove"), std::string::npos) << again.out;
  close(guard);
}

// `reccl inject` pins its drop program per device under /sys/fs/bpf/reccl/inject/<netns>/<dev>;
// a testbed's `down` takes those of its namespaces along, so no program stays loaded.
TEST_F(TestbedLifecycle, DownRemovesTheInjectPinsOfItsHosts) {
  const std::string name = reccl::test::uniqueTestbedName();
  int guardPid = -1;
  int guard = reccl::test::startTeardownGuard(name, &guardPid);
  const std::string pins = "/sys/fs/bpf/reccl/inject/" + name + "-h0";
  struct ClearPins {  // what a failing run left; `clear` removes pins of a vanished namespace
    std::string netns;
    ~ClearPins() { (void)cli({"inject", "clear", "--netns", netns, "--dev", "rail0"}); }
  } clearPins{name + "-h0"};
  auto up = cli({"testbed", "up", "--name", name, "--hosts", "2", "--rails", "1"});
  ASSERT_EQ(up.exitCode, 0) << up.err;
  auto drop = cli({"inject", "drop", "--netns", name + "-h0", "--dev", "rail0", "--rate", ".2"});
  ASSERT_EQ(drop.exitCode, 0) << drop.err;
  struct stat st{};
  ASSERT_EQ(stat((pins + "/rail0/rules").c_str(), &st), 0) << "inject pinned nothing";
  auto down = cli({"testbed", "down", "--name", name});
  EXPECT_EQ(down.exitCode, 0) << down.err;
  EXPECT_NE(stat(pins.c_str(), &st), 0) << pins << " left by down: " << down.out;
  EXPECT_NE(down.out.find("removed inject pins " + pins + "/rail0"), std::string::npos) << down.out;
  EXPECT_TRUE(tracesOf(name).empty()) << join(tracesOf(name));
  close(guard);
}

TEST_F(TestbedLifecycle, DownCleansUpAfterACrashedOwner) {
  const std::string name = reccl::test::uniqueTestbedName();
  // The owner dies right after up without calling down.
  pid_t owner = fork();
  ASSERT_GE(owner, 0);
  if (owner == 0) {
    TestbedSpec spec;
    spec.name = name;
    auto st = Testbed::up(spec);
    _exit(st.ok() ? 0 : 1);
  }
  int ws = 0;
  ASSERT_EQ(waitpid(owner, &ws, 0), owner);
  ASSERT_EQ(reccl::testbed::exitCodeOf(ws), 0);
  ASSERT_FALSE(tracesOf(name).empty());
  auto rep = Testbed::down(name);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_TRUE(rep->errors.empty()) << join(rep->errors);
  EXPECT_TRUE(tracesOf(name).empty()) << join(tracesOf(name));
}

TEST_F(TestbedLifecycle, TwoTestbedsInParallelDoNotCollide) {
  std::unique_ptr<ScopedTestbed> a, b;
  std::string errA, errB;
  TestbedSpec spec;
  spec.hosts = 2;
  spec.rails = 2;
  std::thread ta([&] {
    auto r = ScopedTestbed::create(spec);
    if (r.ok()) a = std::move(*r);
    else errA = r.status().ToString();
  });
  std::thread tbt([&] {
    auto r = ScopedTestbed::create(spec);
    if (r.ok()) b = std::move(*r);
    else errB = r.status().ToString();
  });
  ta.join();
  tbt.join();
  ASSERT_NE(a, nullptr) << errA;
  ASSERT_NE(b, nullptr) << errB;
  ASSERT_NE(a->name(), b->name());
  // Same addresses in both; each passes its own traffic.
  EXPECT_TRUE(a->ping(0, 1, 0));
  EXPECT_TRUE(b->ping(0, 1, 0));
  // A fault in one is invisible in the other.
  auto fab = reccl::netlink::NlSocket::openInNetns(a->state().fabricNetns);
  ASSERT_TRUE(fab.ok());
  ASSERT_TRUE(reccl::netlink::setLinkUp(*fab, "h1r0", false).ok());
  EXPECT_FALSE(a->ping(0, 1, 0, 56, 1));
  EXPECT_TRUE(b->ping(0, 1, 0));
}

TEST_F(TestbedLifecycle, BadInputIsRefusedWithNothingLeftBehind) {
  const std::string name = reccl::test::uniqueTestbedName();
  // Removes whatever a case that was wrongly accepted built, also when an assertion fails.
  int guardPid = -1;
  int guard = reccl::test::startTeardownGuard(name, &guardPid);
  struct Case {
    std::vector<std::string> args;
    int exitCode;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {{"testbed", "frobnicate"}, 64, "frobnicate"},
      {{"testbed", "up", "--name", name, "--hosts", "0"}, 64, "--hosts"},
      {{"testbed", "up", "--name", name, "--hosts", "65"}, 64, "--hosts"},
      {{"testbed", "up", "--name", name, "--rails", "0"}, 64, "--rails"},
      {{"testbed", "up", "--name", name, "--rails", "9"}, 64, "--rails"},
      {{"testbed", "up", "--name", name, "--mtu", "50"}, 64, "--mtu"},
      {{"testbed", "up", "--name", name, "--nic", "rdma"}, 64, "--nic"},
      {{"testbed", "up", "--name", name, "--nic", "veth", "--wire-prio", "5"}, 64, "--wire-prio"},
      {{"testbed", "up", "--name", "Bad_Name"}, 64, "--name"},
      {{"testbed", "up", "--name", "-x"}, 64, ""},
      {{"testbed", "up", "--name", "waytoolongname1"}, 64, "--name"},
      {{"testbed", "up", "--name", "../etc"}, 64, "--name"},
      {{"testbed", "up", "--hosts", "2"}, 64, "--name"},
      {{"testbed", "down", "--name", "Bad/Name"}, 64, "--name"},
      {{"testbed", "exec", "--name", name, "--host", "0", "--", "true"}, 1, name},
      {{"testbed", "run", "--name", name, "--", "true"}, 1, name},
      {{"testbed", "show", "--name", name}, 1, name},
  };
  for (const Case& c : cases) {
    auto r = cli(c.args);
    EXPECT_EQ(r.exitCode, c.exitCode) << join(c.args) << ": " << r.err;
    const std::string err = r.err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << join(c.args) << ": want one line: " << err;
    if (!c.mentions.empty()) {
      EXPECT_NE(err.find(c.mentions), std::string::npos) << join(c.args) << ": " << err;
    }
    EXPECT_TRUE(tracesOf(name).empty()) << join(c.args) << " left " << join(tracesOf(name));
  }
  EXPECT_TRUE(tracesOf("Bad_Name").empty());
  close(guard);
}

TEST_F(TestbedLifecycle, FailureHalfwayThroughUpRollsEverythingBack) {
  // A tap testbed holds two tap queues per rail until its forwarder starts; with few file
  // descriptors allowed, `up` fails with EMFILE in the middle of the hosts.
  const std::string name = reccl::test::uniqueTestbedName();
  int guardPid = -1;
  int guard = reccl::test::startTeardownGuard(name, &guardPid);
  auto run = reccl::testbed::runCaptured(
      "", {"sh", "-c", std::string("ulimit -n 24; exec ") + kCli + " testbed up --name " + name +
                           " --hosts 4 --rails 4 --nic tap"},
      std::chrono::seconds(30));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->exitCode, 1) << run->out << run->err;
  EXPECT_NE(run->err.find("Too many open files"), std::string::npos) << run->err;
  EXPECT_TRUE(tracesOf(name).empty()) << "left behind: " << join(tracesOf(name));
  close(guard);
}

// Signals sent to `up` while it builds a large testbed: the first one interrupts it, any later
// one arrives while it rolls back.
class TestbedUpInterrupted : public ::testing::TestWithParam<std::vector<int>> {
 protected:
  void SetUp() override {
    std::string why = reccl::test::testbedSkipReason();
    if (!why.empty()) GTEST_SKIP() << why;
  }
};

TEST_P(TestbedUpInterrupted, RollsBackWhatItBuiltAndExitsWith128PlusTheSignal) {
  const std::vector<int>& signals = GetParam();
  const std::string name = reccl::test::uniqueTestbedName();
  int guardPid = -1;
  int guard = reccl::test::startTeardownGuard(name, &guardPid);
  reccl::testbed::SpawnOptions so;
  so.argv = {kCli, "testbed", "up", "--name", name, "--hosts", "64", "--rails", "8"};
  so.captureStdout = true;
  so.captureStderr = true;
  auto cp = reccl::testbed::spawn(so);
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  // Interrupt it once the first host exists: well inside the build (64 hosts take seconds).
  auto dl = reccl::Deadline::afterMs(20000);
  while (!reccl::netlink::netnsExists(name + "-h0") && !dl.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(reccl::netlink::netnsExists(name + "-h0"));
  for (int sig : signals) {
    kill(cp->pid, sig);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  int ws = 0;
  ASSERT_EQ(waitpid(cp->pid, &ws, 0), cp->pid);
  // Signals that are pending together are read lowest number first, so with several the exit
  // code names one of them; nothing else may end it (a later signal killing the rollback).
  const int code = reccl::testbed::exitCodeOf(ws);
  if (signals.size() == 1) EXPECT_EQ(code, 128 + signals.front());
  else EXPECT_NE(std::find(signals.begin(), signals.end(), code - 128), signals.end()) << code;
  EXPECT_TRUE(WIFEXITED(ws)) << "ended by signal " << WTERMSIG(ws);
  EXPECT_TRUE(tracesOf(name).empty()) << "left behind: " << join(tracesOf(name));
  close(guard);
}

INSTANTIATE_TEST_SUITE_P(Signals, TestbedUpInterrupted,
                         ::testing::Values(std::vector<int>{SIGTERM}, std::vector<int>{SIGINT},
                                           std::vector<int>{SIGTERM, SIGINT, SIGTERM}));

TEST_F(TestbedLifecycle, NameInUseIsAnErrorAndTheFirstStaysIntact) {
  TestbedSpec spec;
  spec.hosts = 2;
  spec.rails = 1;
  auto tb = ScopedTestbed::create(spec);
  ASSERT_TRUE(tb.ok()) << tb.status().ToString();
  const std::string name = (*tb)->name();
  auto before = tracesOf(name);
  auto r = cli({"testbed", "up", "--name", name, "--hosts", "4", "--rails", "2"});
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find("exists"), std::string::npos) << r.err;
  EXPECT_EQ(tracesOf(name), before);
  EXPECT_TRUE((*tb)->ping(0, 1, 0));
  // A namespace named like a host of the testbed, without a state file, also counts.
  const std::string other = reccl::test::uniqueTestbedName();
  int guardPid = -1;
  int guard = reccl::test::startExitGuard([other] { (void)reccl::netlink::deleteNetns(other + "-h3"); }, &guardPid);
  ASSERT_TRUE(reccl::netlink::createNetns(other + "-h3").ok());
  auto r2 = cli({"testbed", "up", "--name", other});
  EXPECT_EQ(r2.exitCode, 1) << r2.err;
  EXPECT_NE(r2.err.find("in use"), std::string::npos) << r2.err;
  EXPECT_EQ(tracesOf(other), std::vector<std::string>{other + "-h3"});
  close(guard);
}

// Without a state record, `down` cannot know that a namespace named <name>-h<i> is the testbed's:
// it removes one only when it is wired as the testbed's host (mgmt0's peer in <name>-fab), and
// anything else only with --force. A user's namespace and what runs in it survive a mistyped name.
TEST_F(TestbedLifecycle, DownWithoutAStateRecordKeepsNamespacesItCannotProveAreItsOwn) {
  const std::string name = reccl::test::uniqueTestbedName();
  int guardPid = -1;
  int guard = reccl::test::startTeardownGuard(name, &guardPid);
  // A testbed whose record is gone is still recognised by its wiring.
  auto up = cli({"testbed", "up", "--name", name, "--hosts", "2", "--rails", "1"});
  ASSERT_EQ(up.exitCode, 0) << up.err;
  ASSERT_EQ(unlink(reccl::testbed::statePath(name).c_str()), 0);
  auto down = cli({"testbed", "down", "--name", name});
  EXPECT_EQ(down.exitCode, 0) << down.err;
  EXPECT_TRUE(tracesOf(name).empty()) << join(tracesOf(name));

  // A namespace the user made, with a process in it, is not.
  const std::string mine = name + "-h0";
  int nsGuardPid = -1;
  int nsGuard = reccl::test::startExitGuard([mine] { (void)reccl::netlink::deleteNetns(mine); }, &nsGuardPid);
  ASSERT_TRUE(reccl::netlink::createNetns(mine).ok());
  reccl::testbed::SpawnOptions so;
  so.netns = mine;
  so.argv = {"sleep", "60"};
  auto sleeper = reccl::testbed::spawn(so);
  ASSERT_TRUE(sleeper.ok()) << sleeper.status().ToString();
  struct Reap {
    pid_t pid;
    ~Reap() { kill(pid, SIGKILL); waitpid(pid, nullptr, 0); }
  } reap{sleeper->pid};
  auto kept = cli({"testbed", "down", "--name", name});
  EXPECT_EQ(kept.exitCode, 1) << kept.out << kept.err;
  EXPECT_NE(kept.err.find(mine), std::string::npos) << kept.err;
  EXPECT_NE(kept.err.find("--force"), std::string::npos) << kept.err;
  EXPECT_TRUE(reccl::netlink::netnsExists(mine));
  EXPECT_EQ(waitpid(sleeper->pid, nullptr, WNOHANG), 0) << "down killed the user's process";
  auto forced = cli({"testbed", "down", "--name", name, "--force"});
  EXPECT_EQ(forced.exitCode, 0) << forced.err;
  EXPECT_TRUE(tracesOf(name).empty()) << join(tracesOf(name));
  close(nsGuard);
  close(guard);
}

TEST_F(TestbedLifecycle, NotRootIsRefused) {
  const std::string name = reccl::test::uniqueTestbedName();
  auto r = reccl::testbed::runCaptured(
      "", {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", kCli, "testbed", "up",
           "--name", name},
      std::chrono::seconds(10));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exitCode, 1) << r->err;
  EXPECT_NE(r->err.find("root"), std::string::npos) << r->err;
  EXPECT_TRUE(tracesOf(name).empty());
}

class RunTestbed : public reccl::test::TestbedTest<2, 1> {};

TEST_F(RunTestbed, EveryRankGetsItsEnvironmentInItsHost) {
  auto r = cli({"testbed", "run", "--name", testbed().name(), "--ranks-per-host", "3", "--port",
                "29555", "--",
                "sh", "-c",
                "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT "
                "$RECCL_TESTBED $(ip -4 -o addr show mgmt0 | awk '{print $4}')\"; echo err$RANK >&2"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::map<int, std::string> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    int rank = -1;
    ASSERT_EQ(sscanf(line.c_str(), "[rank %d] ", &rank), 1) << line;
    lines[rank] = line.substr(line.find("] ") + 2);
  }
  ASSERT_EQ(lines.size(), 6u) << r.out;
  for (int rank = 0; rank < 6; ++rank) {
    const int host = rank / 3;
    std::string want = std::to_string(rank) + " 6 " + std::to_string(rank % 3) + " 3 10.99.0.1 29555 " +
                       testbed().name() + " 10.99.0." + std::to_string(host + 1) + "/24";
    EXPECT_EQ(lines[rank], want);
    EXPECT_NE(r.err.find("[rank " + std::to_string(rank) + "] err" + std::to_string(rank)),
              std::string::npos)
        << r.err;
  }
}

TEST_F(RunTestbed, ReturnsTheFirstNonZeroExitCode) {
  auto ok = cli({"testbed", "run", "--name", testbed().name(), "--", "true"});
  EXPECT_EQ(ok.exitCode, 0) << ok.err;
  // Rank 1 fails first with 3, rank 0 later with 5 (2 s: rank 1's start may lag on a loaded machine).
  auto r = cli({"testbed", "run", "--name", testbed().name(), "--", "sh", "-c",
                "if [ $RANK = 1 ]; then exit 3; else sleep 2; exit 5; fi"});
  EXPECT_EQ(r.exitCode, 3) << r.err;
  auto missing = cli({"testbed", "run", "--name", testbed().name(), "--", "/nonexistent/cmd"});
  EXPECT_EQ(missing.exitCode, 1) << missing.err;
  EXPECT_NE(missing.err.find("/nonexistent/cmd"), std::string::npos) << missing.err;
}

TEST_F(RunTestbed, TimeoutKillsEveryRankAndReturns124) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = cli({"testbed", "run", "--name", testbed().name(), "--ranks-per-host", "2",
                "--timeout", "1", "--", "sh", "-c", "sleep 60 & sleep 60"});
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.exitCode, 124) << r.err;
  EXPECT_LT(took, std::chrono::seconds(10));
  // No sleep survived in the hosts.
  for (int h = 0; h < 2; ++h) {
    auto ps = testbed().shell(h, "for p in /proc/[0-9]*; do [ \"$(readlink $p/ns/net)\" = \"$(readlink /proc/self/ns/net)\" ] && cat $p/comm; done");
    EXPECT_EQ(ps.out.find("sleep"), std::string::npos) << "host " << h << ": " << ps.out;
  }
}

// The runner's own death (SIGKILL: nothing of it runs) takes each rank's whole process tree,
// not only the rank's first process.
TEST_F(RunTestbed, SigkillOfTheRunnerTakesEveryRanksChildrenAlong) {
  reccl::testbed::SpawnOptions so;
  so.argv = {kCli, "testbed", "run", "--name", testbed().name(), "--", "sh", "-c", "sleep 42; true"};
  so.captureStdout = true;
  so.captureStderr = true;
  so.dieWithParent = false;
  auto cp = reccl::testbed::spawn(so);
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  auto sleepsInHosts = [&] {
    int n = 0;
    for (int h = 0; h < 2; ++h) {
      auto ps = testbed().shell(h, "for p in /proc/[0-9]*; do [ \"$(readlink $p/ns/net)\" = \"$(readlink /proc/self/ns/net)\" ] && cat $p/comm; done 2>/dev/null");
      n += ps.out.find("sleep") != std::string::npos ? 1 : 0;
    }
    return n;
  };
  // What survives a failure here must not outlive the test (nor confuse the next one).
  struct KillSleeps {
    RunTestbed* t;
    ~KillSleeps() {
      for (int h = 0; h < 2; ++h) {
        (void)t->testbed().shell(h, "for p in /proc/[0-9]*; do [ \"$(readlink $p/ns/net)\" = \"$(readlink /proc/self/ns/net)\" ] && [ \"$(cat $p/comm)\" = sleep ] && kill -9 ${p#/proc/}; done 2>/dev/null; true");
      }
    }
  } killSleeps{this};
  auto dl = reccl::Deadline::afterMs(20000);
  while (sleepsInHosts() < 2 && !dl.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(sleepsInHosts(), 2);
  kill(cp->pid, SIGKILL);
  int ws = 0;
  ASSERT_EQ(waitpid(cp->pid, &ws, 0), cp->pid);
  // The kernel delivers the death signal as the runner exits; give the trees a moment to go.
  auto gone = reccl::Deadline::afterMs(5000);
  while (sleepsInHosts() > 0 && !gone.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(sleepsInHosts(), 0);
}

TEST_F(RunTestbed, SigtermIsForwardedSoNoRankIsOrphaned) {
  reccl::testbed::SpawnOptions so;
  so.argv = {kCli, "testbed", "run", "--name", testbed().name(), "--", "sleep", "60"};
  so.captureStdout = true;
  so.captureStderr = true;
  auto cp = reccl::testbed::spawn(so);
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  // Wait until both ranks run (bounded; generous for a loaded machine).
  auto dl = reccl::Deadline::afterMs(20000);
  auto countSleeps = [&] {
    int n = 0;
    for (int h = 0; h < 2; ++h) {
      auto ps = testbed().shell(h, "for p in /proc/[0-9]*; do [ \"$(readlink $p/ns/net)\" = \"$(readlink /proc/self/ns/net)\" ] && cat $p/comm; done 2>/dev/null");
      n += ps.out.find("sleep") != std::string::npos ? 1 : 0;
    }
    return n;
  };
  while (countSleeps() < 2 && !dl.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(countSleeps(), 2);
  kill(cp->pid, SIGTERM);
  int ws = 0;
  ASSERT_EQ(waitpid(cp->pid, &ws, 0), cp->pid);
  EXPECT_EQ(reccl::testbed::exitCodeOf(ws), 128 + SIGTERM);
  EXPECT_EQ(countSleeps(), 0);
}

}  // namespace
