// reccl-detectord as a process: two clients, one leaving, metrics, clean exit on SIGTERM.
// Stalls, limits and namespaces handed over by clients: detectord_guard_test.cpp; metrics over
// HTTP: detectord_metrics_test.cpp; the unit's capabilities: detectord_caps_test.cpp.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "reccl/common/deadline.h"
#include "reccl/detector/detector_client.h"
#include "daemon_process.h"
#include "veth_lab.h"

namespace reccl::detector {
namespace {

using testing::DaemonProcess;
using testing::httpGet;
using testing::VethLab;

// BPF program ids a process holds open.
std::vector<uint32_t> progIds(pid_t pid) {
  std::vector<uint32_t> ids;
  std::string dir = "/proc/" + std::to_string(pid) + "/fdinfo";
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
  EXPECT_TRUE(std::regex_search(metrics, std::regex("\nreccl_detector_events_total\\{[^}]*type=\"link_down\"[^}]*\\} [1-9]")))
      << metrics;
  EXPECT_NE(metrics.find("reccl_detector_detection_latency_seconds_count"), std::string::npos);
  EXPECT_NE(metrics.find("reccl_detector_ringbuf_drops_total 0"), std::string::npos);
  EXPECT_NE(metrics.find("\nreccl_detector_scan_runs_total "), std::string::npos) << metrics;
  EXPECT_NE(httpGet(port, "/nope").find("404"), std::string::npos);

  auto ids = progIds(daemon.pid());
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
    if (dev == "v0") {
      EXPECT_EQ(w->slot, kept->slot);
    }
    if (i % 4 == 1) {
      ASSERT_TRUE(c.value()->unwatch(w->key).ok());
    }
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

// Descriptors the process holds on the namespace file with this inode (nsfs).
int nsDescriptors(pid_t pid, uint32_t ino) {
  int n = 0;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    struct stat st {};
    struct statfs fs {};
    std::string fd = dir + "/" + e->d_name;
    if (stat(fd.c_str(), &st) == 0 && st.st_ino == ino && statfs(fd.c_str(), &fs) == 0 && fs.f_type == NSFS_MAGIC) ++n;
  }
  closedir(d);
  return n;
}

// A job's namespace is held only while a watch uses it: the last unwatch, or a watch that
// fails (no such device), closes it, so a daemon never keeps a deleted namespace alive.
TEST(Detectord, ClosesANamespaceWithItsLastWatch) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: network namespaces";
  VethLab lab("ns", 2);
  ASSERT_TRUE(lab.ok());
  DaemonProcess daemon({"--source", "netlink", "--metrics-port", "-1"});
  ASSERT_NE(daemon.waitStarted(15000), 0) << daemon.logText();
  auto c = DetectorClient::connect(daemon.socket());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto held = [&] { return nsDescriptors(daemon.pid(), lab.hostIno()); };
  EXPECT_FALSE(c.value()->watch({lab.hostNs(), "nosuch0"}).ok());
  EXPECT_EQ(held(), 0) << "a failed watch kept the namespace open";
  auto w0 = c.value()->watch({lab.hostNs(), "eth0"});
  auto w1 = c.value()->watch({lab.hostNs(), "eth1"});
  ASSERT_TRUE(w0.ok() && w1.ok());
  EXPECT_EQ(held(), 1) << "one descriptor per namespace, however many links";
  ASSERT_TRUE(c.value()->unwatch(w0->key).ok());
  EXPECT_EQ(held(), 1) << "eth1 still watched";
  ASSERT_TRUE(c.value()->unwatch(w1->key).ok());
  EXPECT_EQ(held(), 0) << "namespace kept after its last watch";
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

// reccl-detectord on `sock` (netlink source, no metrics), its output discarded; the pid.
pid_t startDaemonAt(const std::string& sock) {
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl(RECCL_DETECTORD_PATH, RECCL_DETECTORD_PATH, "--socket", sock.c_str(), "--metrics-port", "-1",
          "--source", "netlink", static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Its exit code (128 + signal when a signal ended it), or -1 when it still ran after `ms` (then
// it is killed).
int exitOf(pid_t pid, int ms) {
  Deadline dl = Deadline::afterMs(ms);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (dl.expired()) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(10000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(Detectord, RefusesASecondDaemonOnTheSameSocket) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: BPF";
  DaemonProcess first({"--source", "netlink"});
  ASSERT_GT(first.waitStarted(15000), 0) << first.logText();
  std::string sock = first.socket();
  const int rc = exitOf(startDaemonAt(sock), 20000);
  EXPECT_GT(rc, 0) << "the second daemon started, or ran on";
  EXPECT_LT(rc, 128) << "the second daemon was ended by a signal";
  EXPECT_EQ(kill(first.pid(), 0), 0);
  auto c = DetectorClient::connect(sock);
  EXPECT_TRUE(c.ok()) << "first daemon's socket was taken over";
}

// The daemon runs as root: --socket naming a file that is not a stale daemon socket (a typo onto
// a regular file, a stream socket someone serves) is refused, with usage exit 64 or exit 1, and
// the file is left as it was; a stale socket (its daemon gone) is replaced.
TEST(Detectord, ReplacesOnlyAStaleDaemonSocket) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: BPF";
  char dirTemplate[] = "/tmp/rdt-sock-XXXXXX";
  ASSERT_NE(mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  struct Cleanup {
    std::string dir;
    std::vector<pid_t> pids;  // daemons still running
    ~Cleanup() {
      for (pid_t pid : pids) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
      std::system(("rm -rf " + dir).c_str());
    }
  } cleanup{dir, {}};
  auto bound = [](const std::string& path, int type) {
    int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size());
    if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && listen(fd, 1) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
  };

  const std::string file = dir + "/regular.sock";
  { std::ofstream(file) << "keep me"; }
  EXPECT_EQ(exitOf(startDaemonAt(file), 20000), 64);
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "keep me") << "the daemon removed or changed a regular file";

  const std::string stream = dir + "/stream.sock";  // a stream socket in use: someone else's
  int fd = bound(stream, SOCK_STREAM);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(exitOf(startDaemonAt(stream), 20000), 1);
  struct stat st {};
  EXPECT_EQ(stat(stream.c_str(), &st), 0) << "the daemon removed a socket in use";
  close(fd);

  const std::string stale = dir + "/stale.sock";  // a daemon's socket whose daemon is gone
  fd = bound(stale, SOCK_SEQPACKET);
  ASSERT_GE(fd, 0);
  close(fd);
  cleanup.pids.push_back(startDaemonAt(stale));
  Deadline dl = Deadline::afterMs(15000);
  bool served = false;
  while (!served && !dl.expired()) {
    served = DetectorClient::connect(stale).ok();
    if (!served) usleep(20000);
  }
  EXPECT_TRUE(served) << "the daemon did not take over a stale socket";

  // A socket in a directory the daemon had to make: the directory goes with it.
  const std::string made = dir + "/made";
  const pid_t second = startDaemonAt(made + "/d.sock");
  served = false;
  for (Deadline until = Deadline::afterMs(15000); !served && !until.expired();) {
    served = DetectorClient::connect(made + "/d.sock").ok();
    if (!served) usleep(20000);
  }
  if (!served) cleanup.pids.push_back(second);
  ASSERT_TRUE(served) << "the daemon did not serve in a directory it made";
  kill(second, SIGTERM);
  const int rc = exitOf(second, 10000);  // reaped either way
  EXPECT_EQ(rc, 0);
  EXPECT_NE(stat(made.c_str(), &st), 0) << "the daemon left the directory it made";
}

// An invalid RECCL_* value is refused at start with usage exit 64, naming the variable, its value
// and the range, as a communicator's init does; the daemon never runs on a defaulted value.
TEST(Detectord, AnInvalidParameterIsRefusedAtStart) {
  std::string cmd = std::string("RECCL_DAMPING_HALFLIFE_MS=-3 ") + RECCL_DETECTORD_PATH +
                    " --socket /tmp/rdt-param-$$.sock --metrics-port -1 --source netlink 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int st = pclose(p);
  ASSERT_TRUE(WIFEXITED(st)) << out;
  EXPECT_EQ(WEXITSTATUS(st), 64) << out;
  EXPECT_NE(out.find("RECCL_DAMPING_HALFLIFE_MS"), std::string::npos) << out;
  EXPECT_NE(out.find("-3"), std::string::npos) << out;
}

}  // namespace
}  // namespace reccl::detector
