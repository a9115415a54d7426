// reccl-detectord as a process: two clients, one leaving, metrics, clean exit on SIGTERM.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "reccl/common/deadline.h"
#include "reccl/detector/detector_client.h"
#include "veth_lab.h"

namespace reccl::detector {
namespace {

using testing::VethLab;

class DaemonProcess {
 public:
  explicit DaemonProcess(std::vector<std::string> extra) {
    sock_ = "/tmp/rdt-" + std::to_string(getpid()) + ".sock";
    log_ = "/tmp/rdt-" + std::to_string(getpid()) + ".log";
    std::vector<std::string> args = {RECCL_DETECTORD_PATH, "--socket", sock_, "--metrics-port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~DaemonProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    unlink(sock_.c_str());
    unlink(log_.c_str());
  }
  // Waits for the "started" log line; returns the metrics port (0 on failure).
  int waitStarted(int ms) {
    Deadline dl = Deadline::afterMs(ms);
    std::regex re("\"metrics_port\":([0-9]+)");
    while (!dl.expired()) {
      std::string text = logText();
      std::smatch m;
      if (text.find("\"started\"") != std::string::npos && std::regex_search(text, m, re))
        return std::stoi(m[1]);
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return 0;
      }
      usleep(20000);
    }
    return 0;
  }
  std::string logText() const {
    std::ifstream f(log_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  // SIGTERM and wait; the exit status, or -1 when it did not exit in time.
  int terminate(int ms) {
    kill(pid_, SIGTERM);
    Deadline dl = Deadline::afterMs(ms);
    while (!dl.expired()) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      usleep(10000);
    }
    return -1;
  }
  // BPF program ids the process holds open.
  std::vector<uint32_t> progIds() const {
    std::vector<uint32_t> ids;
    std::string dir = "/proc/" + std::to_string(pid_) + "/fdinfo";
    DIR* d = opendir(dir.c_str());
    if (!d) return ids;
    while (dirent* e = readdir(d)) {
      std::ifstream f(dir + "/" + e->d_name);
      std::string line;
      while (std::getline(f, line))
        if (line.rfind("prog_id:", 0) == 0) ids.push_back(static_cast<uint32_t>(std::stoul(line.substr(8))));
    }
    closedir(d);
    return ids;
  }
  pid_t pid() const { return pid_; }
  const std::string& socket() const { return sock_; }

 private:
  pid_t pid_ = -1;
  std::string sock_, log_;
};

std::string httpGet(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    std::string req = "GET " + path + " HTTP/1.0\r\n\r\n";
    (void)!write(fd, req.data(), req.size());
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

std::vector<LinkEvent> eventsFor(DetectorClient& c, LinkKey key, int ms) {
  std::vector<LinkEvent> out;
  Deadline dl = Deadline::afterMs(ms);
  while (!dl.expired() && out.empty()) {
    std::vector<LinkEvent> got;
    Status st = c.receive(dl.remainingMsForPoll(), &got);
    for (auto& e : got)
      if (e.link == key) out.push_back(e);
    if (!st.ok()) break;
  }
  return out;
}

TEST(Detectord, ServesTwoClientsSurvivesOneLeavingAndCleansUpOnSigterm) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: BPF and network namespaces";
  VethLab lab("dd", 2);
  ASSERT_TRUE(lab.ok());
  DaemonProcess daemon({"--hold-down-ms", "100"});
  int port = daemon.waitStarted(15000);
  ASSERT_GT(port, 0) << "daemon did not start:\n" << daemon.logText();
  struct stat st {};
  ASSERT_EQ(stat(daemon.socket().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "no group configured: root only";

  auto a = DetectorClient::connect(daemon.socket());
  auto b = DetectorClient::connect(daemon.socket());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto wa = a.value()->watch({lab.hostNs(), "eth0"});
  auto wb0 = b.value()->watch({lab.hostNs(), "eth0"});
  auto wb1 = b.value()->watch({lab.hostNs(), "eth1"});
  ASSERT_TRUE(wa.ok() && wb0.ok() && wb1.ok()) << wa.status().ToString();
  EXPECT_EQ(wa->key, wb0->key);
  EXPECT_EQ(wa->slot, wb0->slot) << "one slot per link, shared by clients";
  auto bad = a.value()->watch({lab.hostNs(), "nosuch0"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nosuch0"), std::string::npos);

  auto map = a.value()->mapLinkState();
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  uint64_t epoch0 = map.value()->epoch(wa->slot);

  lab.settle();
  ASSERT_TRUE(lab.switchPort(0, false));
  // Deadlines for a loaded machine: eventsFor returns with the first event.
  auto ea = eventsFor(*a.value(), wa->key, 10000);
  auto eb = eventsFor(*b.value(), wa->key, 10000);
  ASSERT_EQ(ea.size(), 1u);
  ASSERT_EQ(eb.size(), 1u);
  EXPECT_EQ(ea[0].type, LinkEventType::kLinkDown);
  EXPECT_EQ(eb[0].type, LinkEventType::kLinkDown);
  EXPECT_EQ(ea[0].ifname, "eth0");
  EXPECT_GT(map.value()->epoch(wa->slot), epoch0) << "mapped epoch did not move";
  EXPECT_EQ(map.value()->slots()[wa->slot].state & RECCL_LINK_STATE_CARRIER, 0u);

  // Client A leaves; B keeps getting events, for its own links only.
  a.value().reset();
  // The daemon handles A's close on its own loop: wait (bounded) until its status shows it.
  auto status = b.value()->statusJson();
  for (Deadline dl = Deadline::afterMs(10000);
       status.ok() && status->find("\"clients\":1") == std::string::npos && !dl.expired();
       status = b.value()->statusJson())
    usleep(10000);
  ASSERT_TRUE(status.ok());
  EXPECT_NE(status->find("\"clients\":1"), std::string::npos) << *status;
  ASSERT_TRUE(lab.hostPort(1, false));
  auto eb1 = eventsFor(*b.value(), wb1->key, 10000);
  ASSERT_EQ(eb1.size(), 1u) << "daemon stopped serving after a client left";
  EXPECT_EQ(eb1[0].ifname, "eth1");
  EXPECT_EQ(kill(daemon.pid(), 0), 0);

  status = b.value()->statusJson();
  ASSERT_TRUE(status.ok());
  EXPECT_NE(status->find("\"clients\":1"), std::string::npos) << *status;
  EXPECT_NE(status->find("\"scan_runs\":"), std::string::npos) << *status;

  std::string metrics = httpGet(port, "/metrics");
  EXPECT_NE(metrics.find("200 OK"), std::string::npos);
  EXPECT_NE(metrics.find("reccl_detector_events_total{type=\"link_down\""), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("reccl_detector_detection_latency_seconds_count"), std::string::npos);
  EXPECT_NE(metrics.find("reccl_detector_ringbuf_drops_total 0"), std::string::npos);
  EXPECT_NE(metrics.find("\nreccl_detector_scan_runs_total "), std::string::npos) << metrics;
  EXPECT_NE(httpGet(port, "/nope").find("404"), std::string::npos);

  auto ids = daemon.progIds();
  EXPECT_FALSE(ids.empty()) << "daemon holds no BPF programs";
  b.value().reset();
  ASSERT_EQ(daemon.terminate(5000), 0) << daemon.logText();
  EXPECT_NE(stat(daemon.socket().c_str(), &st), 0) << "socket file left behind";
  for (uint32_t id : ids) {
    int fd = -1;
    for (int i = 0; i < 50; ++i) {
      fd = bpf_prog_get_fd_by_id(id);
      if (fd < 0) break;
      close(fd);
      usleep(20000);
    }
    EXPECT_LT(fd, 0) << "BPF program " << id << " still loaded after SIGTERM";
  }
}

// More links over the daemon's life than it has slots (RECCL_LINK_MAX_SLOTS), each watched by a
// client that then leaves (half of them unwatch first): a leaving client's watches give their
// slots back, so the daemon keeps serving job after job. A link that another client still
// watches keeps its slot.
TEST(Detectord, FreesTheWatchesOfClientsThatLeave) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: network namespaces";
  const std::string ns = "rdt-slots-" + std::to_string(getpid());
  struct NsGuard {
    std::string name;
    ~NsGuard() { testing::runCmd("ip netns del " + name); }
  } guard{ns};
  ASSERT_TRUE(testing::runCmd("ip netns add " + ns));
  const int pairs = RECCL_LINK_MAX_SLOTS / 2 + 8;  // 2 interfaces each: 272 links > 256 slots
  std::string batch = "/tmp/rdt-slots-" + std::to_string(getpid()) + ".batch";
  {
    std::ofstream f(batch);
    for (int i = 0; i < pairs; ++i) f << "link add v" << i << " type veth peer name w" << i << "\n";
  }
  bool made = testing::runCmd("ip -n " + ns + " -batch " + batch);
  unlink(batch.c_str());
  ASSERT_TRUE(made) << "ip -batch failed";
  DaemonProcess daemon({"--source", "netlink"});
  ASSERT_GT(daemon.waitStarted(15000), 0) << daemon.logText();
  auto keeper = DetectorClient::connect(daemon.socket());
  ASSERT_TRUE(keeper.ok()) << keeper.status().ToString();
  auto kept = keeper.value()->watch({ns, "v0"});
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  int watched = 0;
  for (int i = 0; i < 2 * pairs; ++i) {
    std::string dev = (i % 2 ? "w" : "v") + std::to_string(i / 2);
    auto c = DetectorClient::connect(daemon.socket());
    ASSERT_TRUE(c.ok()) << "client " << i << ": " << c.status().ToString();
    auto w = c.value()->watch({ns, dev});
    ASSERT_TRUE(w.ok()) << "client " << i << " (" << dev << "): " << w.status().ToString();
    if (dev == "v0") EXPECT_EQ(w->slot, kept->slot);
    if (i % 4 == 1) ASSERT_TRUE(c.value()->unwatch(w->key).ok());
    ++watched;
  }  // each client closes its socket here
  EXPECT_EQ(watched, 2 * pairs);
  // Every slot but the keeper's is free again: the daemon status lists only v0.
  std::string status;
  Deadline dl = Deadline::afterMs(3000);
  do {  // the daemon handles the last client's close on its own loop
    auto st = keeper.value()->statusJson();
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    status = *st;
  } while (status.find("\"ifname\":\"w") != std::string::npos && !dl.expired() && (usleep(10000), true));
  auto j = nlohmann::json::parse(status, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("links")) << status;
  EXPECT_EQ(j["links"].size(), 1u) << status;
  EXPECT_NE(status.find("\"ifname\":\"v0\""), std::string::npos) << status;
  // The kept link still reports.
  auto map = keeper.value()->mapLinkState();
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map.value()->slots()[kept->slot].ifindex, kept->key.ifindex);
}

// A daemon that hangs (SIGSTOP: socket open, nothing answered) fails the client's liveness
// check within its deadline; the same daemon, continued, answers again.
TEST(Detectord, KeepAliveNoticesAHungDaemon) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  DaemonProcess daemon({"--source", "netlink"});
  ASSERT_GT(daemon.waitStarted(15000), 0) << daemon.logText();
  auto c = DetectorClient::connect(daemon.socket());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto tick = [&](int ms) {
    Deadline dl = Deadline::afterMs(ms);
    while (!dl.expired()) {
      std::vector<LinkEvent> ev;
      Status st = c.value()->receive(5, &ev);
      if (st.ok()) st = c.value()->keepAlive(50, 300);
      if (!st.ok()) return st;
    }
    return Status::Ok();
  };
  ASSERT_TRUE(tick(400).ok());
  EXPECT_GE(c.value()->pongs(), 3u);
  ASSERT_EQ(kill(daemon.pid(), SIGSTOP), 0);
  uint64_t t0 = monotonicNs();
  Status st = tick(5000);
  double ms = (monotonicNs() - t0) / 1e6;
  kill(daemon.pid(), SIGCONT);
  EXPECT_EQ(st.code(), Errc::kTimeout) << st.ToString();
  // Ping every 50 ms, pong deadline 300 ms: ~350 ms, plus up to 1.6 s of a loaded machine.
  EXPECT_LT(ms, 2000) << "hung daemon noticed late";
  auto again = DetectorClient::connect(daemon.socket());
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

TEST(Detectord, RefusesASecondDaemonOnTheSameSocket) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: BPF";
  DaemonProcess first({"--source", "netlink"});
  ASSERT_GT(first.waitStarted(15000), 0) << first.logText();
  std::string sock = first.socket();
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl(RECCL_DETECTORD_PATH, RECCL_DETECTORD_PATH, "--socket", sock.c_str(), "--metrics-port", "-1",
          "--source", "netlink", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_EQ(kill(first.pid(), 0), 0);
  auto c = DetectorClient::connect(sock);
  EXPECT_TRUE(c.ok()) << "first daemon's socket was taken over";
}

}  // namespace
}  // namespace reccl::detector
