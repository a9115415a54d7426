// What a local client can do to reccl-detectord, tried as an attacker would: a namespace "path"
// that is a FIFO, silent connections to /metrics, paths in directories the client cannot read,
// descriptors that are not network namespaces, floods of requests, watches and connections. The
// daemon's loop must keep answering pings within milliseconds throughout, and each client must
// stay inside its limits.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "daemon_process.h"
#include "reccl/detector/detector_client.h"
#include "veth_lab.h"

namespace reccl::detector {
namespace {

using nlohmann::json;
using testing::DaemonProcess;
using testing::percentile;
using testing::pingSeries;
using testing::RawClient;

// The issue's bar: pings answered within 10 ms while a stall is attempted. On this shared 2-vCPU
// machine a scheduling hiccup alone can exceed that once in a while, so the median and the 90th
// percentile are held to 10 ms and the worst ping to 100 ms: half a stall of the old loop (each
// silent metrics connection held it 200 ms; a FIFO held it until someone wrote to it).
void expectResponsive(const std::vector<double>& rtt, const char* during) {
  ASSERT_FALSE(rtt.empty());
  double worst = *std::max_element(rtt.begin(), rtt.end());
  std::printf("ping during %s: %zu pings, p50 %.3f ms, p90 %.3f ms, max %.3f ms\n", during, rtt.size(),
              percentile(rtt, 0.5), percentile(rtt, 0.9), worst);
  EXPECT_LT(percentile(rtt, 0.5), 10.0) << during;
  EXPECT_LT(percentile(rtt, 0.9), 10.0) << during;
  EXPECT_LT(worst, 100.0) << during;
}

// The stall tests ping every 10 ms: the default request rate of a client (100/s; a burst of 200).
constexpr int kPingEveryMs = 10;

json hello(RawClient& c) {
  c.send(R"({"op":"hello","version":2})");
  return json::parse(c.recv(5000), nullptr, false);
}

// Item 3 of the hardening issue: a watch whose namespace is a FIFO used to leave the daemon's
// only thread in open() until someone wrote to the FIFO.
TEST(DetectordGuard, AFifoAsNamespaceNeitherBlocksNorDelaysTheLoop) {
  DaemonProcess daemon({"--source", "netlink", "--metrics-port", "-1"});
  ASSERT_NE(daemon.waitStarted(15000), 0) << daemon.logText();
  std::string fifo = daemon.socket() + ".fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0666), 0);
  struct Unlink {
    std::string p;
    ~Unlink() { unlink(p.c_str()); }
  } unlinkFifo{fifo};
  RawClient pinger(daemon.socket()), byPath(daemon.socket()), byFd(daemon.socket());
  ASSERT_TRUE(pinger.ok() && byPath.ok() && byFd.ok());
  ASSERT_TRUE(hello(byPath).is_object());
  ASSERT_TRUE(hello(byFd).is_object());
  // Both forms: the path alone (what the daemon used to open), and the FIFO itself handed over.
  byPath.send(json{{"op", "watch"}, {"netns", fifo}, {"dev", "eth0"}}.dump());
  UniqueFd fifoFd(open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(fifoFd.valid());
  byFd.send(json{{"op", "watch"}, {"netns", "fifo"}, {"dev", "eth0"}}.dump(), fifoFd.get());
  auto rtt = pingSeries(pinger, 500, kPingEveryMs);
  expectResponsive(rtt, "FIFO watches");
  for (RawClient* c : {&byPath, &byFd}) {
    json r = json::parse(c->recv(2000), nullptr, false);
    ASSERT_TRUE(r.is_object()) << "no answer to a FIFO watch";
    EXPECT_EQ(r.value("op", ""), "watch");
    EXPECT_FALSE(r.value("ok", true));
  }
}

// Item 4: each connection to /metrics used to get up to 200 ms inside the one event loop; 20
// silent ones delayed pings by seconds. Here 20 silent connections are held open (and reopened
// as the server times them out) while the loop is pinged.
TEST(DetectordGuard, SilentMetricsConnectionsDoNotDelayTheLoop) {
  DaemonProcess daemon({"--source", "netlink"});
  int port = daemon.waitStarted(15000);
  ASSERT_GT(port, 0) << daemon.logText();
  RawClient pinger(daemon.socket());
  ASSERT_TRUE(pinger.ok());
  auto silent = [port] {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) fd.reset();
    return fd;
  };
  std::atomic<bool> stop{false};
  std::atomic<int> opened{0};
  std::thread holder([&] {
    std::vector<UniqueFd> conns;
    for (int i = 0; i < 20; ++i, ++opened) conns.push_back(silent());
    while (!stop.load()) {
      std::vector<pollfd> p;
      for (auto& c : conns) p.push_back({c.get(), POLLIN, 0});
      if (poll(p.data(), p.size(), 20) <= 0) continue;
      for (size_t i = 0; i < conns.size(); ++i)
        if (p[i].revents) {  // the server gave up on it: another silent one takes its place
          conns[i] = silent();
          ++opened;
        }
    }
  });
  Deadline dl = Deadline::afterMs(5000);
  while (opened.load() < 20 && !dl.expired()) usleep(1000);
  auto rtt = pingSeries(pinger, 1500, kPingEveryMs);
  stop = true;
  holder.join();
  expectResponsive(rtt, "20 silent metrics connections");
  // The server is itself again once they are gone.
  EXPECT_NE(testing::httpGet(port, "/metrics").find("200 OK"), std::string::npos);
}

// Runs `body` in a child as uid/gid 65534 (nobody/nogroup); true when it exited 0.
bool asNobody(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
      _exit(90);
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    ADD_FAILURE() << "child as nobody: " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// A group member used to learn which files exist in directories it cannot read, from the
// daemon's answer to a watch of that path. The daemon now opens no client-named path at all:
// a namespace comes as a descriptor the client opened itself, and a path alone gets the same
// answer whatever it names.
TEST(DetectordGuard, APathAloneIsRefusedAlikeWhateverItNames) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: a directory only root reads, a client as another user";
  group* g = getgrgid(65534);
  ASSERT_NE(g, nullptr) << "no group 65534";
  DaemonProcess daemon({"--source", "netlink", "--metrics-port", "-1", "--group", g->gr_name});
  ASSERT_NE(daemon.waitStarted(15000), 0) << daemon.logText();
  std::string hidden = daemon.socket() + ".hidden";
  ASSERT_EQ(mkdir(hidden.c_str(), 0700), 0);
  std::string exists = hidden + "/net";
  UniqueFd(open(exists.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  struct Cleanup {
    std::string dir, file;
    ~Cleanup() {
      unlink(file.c_str());
      rmdir(dir.c_str());
    }
  } cleanup{hidden, exists};
  std::string sock = daemon.socket();
  EXPECT_TRUE(asNobody([&] {
    RawClient c(sock);
    if (!c.ok() || !hello(c).is_object()) return 2;
    std::string replies[3];
    const std::string paths[3] = {exists, hidden + "/absent", "/proc/1/ns/net"};
    for (int i = 0; i < 3; ++i) {
      c.send(json{{"op", "watch"}, {"netns", paths[i]}, {"dev", "eth0"}}.dump());
      replies[i] = c.recv(2000);
    }
    std::printf("reply to a path alone: %s\n", replies[0].c_str());
    if (replies[0].find("\"ok\":false") == std::string::npos) return 3;
    return replies[0] == replies[1] && replies[1] == replies[2] ? 0 : 4;
  }));
}

// What a client may hand over as a namespace: only an nsfs file of a network namespace, opened
// for reading. Each refusal names why; the client stays connected.
struct PassedFd {
  const char* name;
  std::function<UniqueFd(const std::string& dir)> open;
  const char* error;  // "" : accepted
};

void PrintTo(const PassedFd& p, std::ostream* os) { *os << p.name; }

class DetectordPassedNamespace : public ::testing::TestWithParam<PassedFd> {};

TEST_P(DetectordPassedNamespace, IsCheckedBeforeUse) {
  DaemonProcess daemon({"--source", "netlink", "--metrics-port", "-1"});
  ASSERT_NE(daemon.waitStarted(15000), 0) << daemon.logText();
  RawClient c(daemon.socket());
  ASSERT_TRUE(c.ok() && hello(c).is_object());
  UniqueFd fd = GetParam().open(daemon.socket() + ".d");
  ASSERT_TRUE(fd.valid()) << strerror(errno);
  c.send(json{{"op", "watch"}, {"netns", GetParam().name}, {"dev", "lo"}}.dump(), fd.get());
  json r = json::parse(c.recv(5000), nullptr, false);
  ASSERT_TRUE(r.is_object()) << "no reply";
  std::string want = GetParam().error;
  if (want.empty()) {
    EXPECT_TRUE(r.value("ok", false)) << r.dump();
  } else {
    EXPECT_FALSE(r.value("ok", true)) << r.dump();
    EXPECT_NE(r.value("error", "").find(want), std::string::npos) << r.dump();
  }
  EXPECT_GE(c.ping(1, 2000), 0) << "client dropped after a refused watch";
}

INSTANTIATE_TEST_SUITE_P(
    Fds, DetectordPassedNamespace,
    ::testing::Values(
        PassedFd{"own_netns", [](const std::string&) { return UniqueFd(open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)); }, ""},
        PassedFd{"o_path", [](const std::string&) { return UniqueFd(open("/proc/self/ns/net", O_PATH | O_CLOEXEC)); }, "O_PATH"},
        PassedFd{"uts_ns", [](const std::string&) { return UniqueFd(open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC)); },
                 "not a network namespace"},
        PassedFd{"regular_file", [](const std::string&) { return UniqueFd(open("/proc/self/stat", O_RDONLY | O_CLOEXEC)); },
                 "not a namespace file"},
        PassedFd{"socket", [](const std::string&) { return UniqueFd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)); },
                 "not a namespace file"}),
    [](const auto& p) { return std::string(p.param.name); });

// The metric the daemon keeps for each refusal or drop, read from /metrics.
double metricValue(int port, const std::string& series) {
  std::string text = testing::httpGet(port, "/metrics");
  std::smatch m;
  std::regex re("\n" + std::regex_replace(series, std::regex(R"([{}\[\]().*+?^$|\\])"), R"(\$&)") + " ([0-9.e+]+)");
  return std::regex_search(text, m, re) ? std::stod(m[1]) : 0;
}

TEST(DetectordGuard, AClientOverItsRequestRateIsDroppedOthersAreServed) {
  DaemonProcess daemon({"--source", "netlink", "--max-requests-per-sec", "20"});
  int port = daemon.waitStarted(15000);
  ASSERT_GT(port, 0) << daemon.logText();
  RawClient flood(daemon.socket()), other(daemon.socket());
  ASSERT_TRUE(flood.ok() && other.ok());
  for (int i = 0; i < 200 && flood.send(R"({"op":"ping","seq":1})"); ++i) {
  }
  std::string last;
  for (Deadline dl = Deadline::afterMs(5000); last != "<closed>" && !dl.expired();) last = flood.recv(dl.remainingMsForPoll());
  EXPECT_EQ(last, "<closed>") << "a client sending 200 requests at once (limit 20/s, burst 40) was not dropped";
  EXPECT_GE(other.ping(7, 2000), 0);
  EXPECT_EQ(metricValue(port, R"(reccl_detectord_clients_dropped_total{reason="over_rate"})"), 1);
}

TEST(DetectordGuard, ARequestOverTheSizeLimitDropsItsClient) {
  DaemonProcess daemon({"--source", "netlink"});
  int port = daemon.waitStarted(15000);
  ASSERT_GT(port, 0) << daemon.logText();
  RawClient big(daemon.socket());
  ASSERT_TRUE(big.ok());
  ASSERT_TRUE(big.send(json{{"op", "ping"}, {"pad", std::string(kDaemonMaxRequest, 'x')}}.dump()));
  EXPECT_EQ(big.recv(5000), "<closed>");
  EXPECT_EQ(metricValue(port, R"(reccl_detectord_clients_dropped_total{reason="malformed"})"), 1);
}

// A request that is no request (not one JSON object, a field of the wrong type) is answered
// with why (op "error"), then its client is dropped; a known op with a bad value is answered in
// that op's name (a client matches replies to requests by op), and the client stays.
TEST(DetectordGuard, BadRequestsAreAnsweredWithWhy) {
  DaemonProcess daemon({"--source", "netlink"});
  int port = daemon.waitStarted(15000);
  ASSERT_GT(port, 0) << daemon.logText();
  for (const char* garbage : {R"({"op":"status"} trailing)", R"({"op":"ping","seq":1}{"op":"ping","seq":2})", "[]"}) {
    RawClient c(daemon.socket());
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.send(garbage));
    auto r = json::parse(c.recv(5000), nullptr, false);
    EXPECT_EQ(r.value("op", ""), "error") << garbage << ": " << r.dump();
    EXPECT_EQ(r.value("ok", true), false) << garbage;
    EXPECT_NE(r.value("error", "").find("not a JSON object"), std::string::npos) << garbage << ": " << r.dump();
    EXPECT_EQ(c.recv(5000), "<closed>") << garbage;
  }
  struct Case {
    const char* text;
    const char* op;
    const char* error;
    bool stays;  // a bad value; a field of the wrong type is no request
  };
  for (const Case& k : {Case{R"({"op":"watch","netns":"x","dev":"a/b"})", "watch", "bad interface name 'a/b'", true},
                        Case{R"({"op":"reboot"})", "error", "unknown op 'reboot'", true},
                        Case{R"({"op":"ping","seq":-1})", "error", "'seq'", false},
                        Case{R"({"op":"watch","netns":"x","dev":7})", "error", "'dev' is not a string", false}}) {
    RawClient c(daemon.socket());
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.send(k.text));
    auto r = json::parse(c.recv(5000), nullptr, false);
    EXPECT_EQ(r.value("op", ""), k.op) << k.text << ": " << r.dump();
    EXPECT_EQ(r.value("ok", true), false) << k.text;
    EXPECT_NE(r.value("error", "").find(k.error), std::string::npos) << k.text << ": " << r.dump();
    if (k.stays) {
      EXPECT_GE(c.ping(3, 5000), 0) << k.text << ": the client should stay";
    } else {
      EXPECT_EQ(c.recv(5000), "<closed>") << k.text;
    }
  }
  EXPECT_EQ(metricValue(port, R"(reccl_detectord_clients_dropped_total{reason="malformed"})"), 5);
}

TEST(DetectordGuard, ConnectionsPerUserAreBounded) {
  DaemonProcess daemon({"--source", "netlink", "--max-clients-per-uid", "3"});
  int port = daemon.waitStarted(15000);
  ASSERT_GT(port, 0) << daemon.logText();
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<RawClient>(daemon.socket()));
    ASSERT_GE(held.back()->ping(1, 2000), 0) << "connection " << i << " within the limit";
  }
  RawClient fourth(daemon.socket());
  EXPECT_EQ(fourth.recv(5000), "<closed>") << "a 4th connection of one user (limit 3) was kept";
  EXPECT_EQ(metricValue(port, R"(reccl_detectord_clients_refused_total{reason="per_uid"})"), 1);
  held.pop_back();
  // The daemon sees the close on its loop; a new connection is accepted once it has.
  double rtt = -1;
  for (Deadline dl = Deadline::afterMs(5000); rtt < 0 && !dl.expired();) {
    RawClient again(daemon.socket());
    rtt = again.ping(2, 500);
  }
  EXPECT_GE(rtt, 0) << "no connection accepted after one of the three left";
}

TEST(DetectordGuard, WatchesPerClientAreBounded) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: network namespaces";
  testing::VethLab lab("wl", 3);
  ASSERT_TRUE(lab.ok());
  DaemonProcess daemon({"--source", "netlink", "--metrics-port", "-1", "--max-watches-per-client", "2"});
  ASSERT_NE(daemon.waitStarted(15000), 0) << daemon.logText();
  auto a = DetectorClient::connect(daemon.socket());
  auto b = DetectorClient::connect(daemon.socket());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a.value()->watch({lab.hostNs(), "eth0"}).ok());
  ASSERT_TRUE(a.value()->watch({lab.hostNs(), "eth1"}).ok());
  auto third = a.value()->watch({lab.hostNs(), "eth2"});
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.status().message().find("most allowed"), std::string::npos) << third.status().ToString();
  EXPECT_TRUE(b.value()->watch({lab.hostNs(), "eth2"}).ok()) << "the limit is per client";
}

}  // namespace
}  // namespace reccl::detector
