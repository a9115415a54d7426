// The node daemon reccl-detectord as the failover's fault source, on the testbed (2 hosts x 2
// rails, one rank per host): the ranks (in their own namespaces) watch their NICs through the
// daemon; a rail taken down on the switch side is detected by the daemon and routed around with
// bit-exact results; killing the daemon mid-run leaves failover working (NIC poll, or the
// in-process detector under RECCL_DETECTOR=auto) and a restarted daemon is taken back.
// FAILOVER_TEST_VERBOSE=1 prints the ranks' and the daemon's output.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "failover_job.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// reccl-detectord for one test: a socket path unique to this process and run, metrics on a free
// port, no pinned objects (the daemon pins nothing). It dies with this process (SIGTERM on parent
// death: it unloads its programs and removes its socket); the destructor stops it and removes
// what is left. Its JSON-lines log goes to a memfd (nothing on disk to clean).
class Daemon {
 public:
  Daemon() {
    static int n = 0;
    sock_ = "/tmp/reccl-dsrc-" + std::to_string(getpid()) + "-" + std::to_string(n++) + ".sock";
    logFd_ = memfd_create("detectord-log", MFD_CLOEXEC);
  }
  ~Daemon() {
    stop(SIGTERM, 5000);
    stop(SIGKILL, 5000);
    unlink(sock_.c_str());
    if (logFd_ >= 0) close(logFd_);
  }
  // Starts it and waits until its socket accepts connections; "" or why not.
  std::string start() {
    pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) return std::string("fork: ") + strerror(errno);
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);
      dup2(logFd_, 1);
      dup2(logFd_, 2);
      // The node daemon is configured by its flags, not by a job's RECCL_DETECTOR.
      unsetenv("RECCL_DETECTOR");
      execl(RECCL_DETECTORD_PATH, RECCL_DETECTORD_PATH, "--socket", sock_.c_str(), "--metrics-port", "0",
            "--source", "auto", "--hold-down-ms", "300", static_cast<char*>(nullptr));
      _exit(127);
    }
    auto end = Clock::now() + 30s;  // BPF probing on a loaded host
    while (Clock::now() < end) {
      if (answers()) return "";
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return "reccl-detectord exited: " + log();
      }
      std::this_thread::sleep_for(20ms);
    }
    return "reccl-detectord did not listen within 30 s: " + log();
  }
  void signal(int sig) const {
    if (pid_ > 0) kill(pid_, sig);
  }
  // Signals it and waits up to ms for its end; true when it is gone.
  bool stop(int sig, int ms) {
    if (pid_ <= 0) return true;
    kill(pid_, sig);
    kill(pid_, SIGCONT);  // a stopped (hung) daemon takes its SIGTERM once continued
    auto end = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < end) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }
  std::string log() const {
    std::string out;
    char buf[4096];
    off_t off = 0;
    ssize_t n;
    while ((n = pread(logFd_, buf, sizeof(buf), off)) > 0) {
      out.append(buf, static_cast<size_t>(n));
      off += n;
    }
    return out;
  }
  const std::string& socket() const { return sock_; }

 private:
  bool answers() const {
    int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, sock_.c_str(), sock_.size());
    bool ok = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    if (fd >= 0) close(fd);
    return ok;
  }
  std::string sock_;
  int logFd_ = -1;
  pid_t pid_ = -1;
};

using reccl::test::failover::countMatches;
using reccl::test::failover::Job;
using reccl::test::failover::sumField;
using reccl::test::failover::waitFailovers;

int matches(const std::string& text, const std::string& re) { return countMatches(text, re); }

// The failover fixture (2 hosts x 2 rails; link(), every rail back up after each test) plus a
// daemon per test.
class DaemonSource : public reccl::test::failover::FailoverTest<2> {
 protected:
  void SetUp() override {
    FailoverTest<2>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    std::string err = daemon_.start();
    ASSERT_EQ(err, "");
  }
  std::string env(const std::string& mode, const std::string& extra) const {
    return "RECCL_DETECTOR=" + mode + " RECCL_DETECTORD_SOCKET=" + daemon_.socket() +
           " RECCL_DEBUG=INFO RECCL_DEBUG_SUBSYS=FAILOVER RECCL_TIMEOUT_MS=30000 RECCL_STALL_TIMEOUT_MS=1000"
           " RECCL_HOLDDOWN_MS=300 " + extra;
  }
  void expectAllOk(Job& j) {
    int code = j.wait();
    std::string t = j.text();
    if (getenv("FAILOVER_TEST_VERBOSE")) printf("%s\n--- daemon ---\n%s", t.c_str(), daemon_.log().c_str());
    EXPECT_EQ(code, 0) << t;
    EXPECT_EQ(matches(t, "done rank [0-9]+"), 2) << t;  // every result checked bit for bit by the worker
  }
  Daemon daemon_;
};

const char* kOnDaemon = "fault source: daemon reccl-detectord on ";

// Host 0's switch port on rail 0 dies mid-allreduce: host 0's rank learns it from the daemon.
TEST_F(DaemonSource, DaemonDetectsASwitchSideLinkDown) {
  Job j(testbed().name(), env("daemon", "WORKER_SECONDS=6 WORKER_COUNT=262144"), 120);
  ASSERT_TRUE(j.waitForMatch("started rank", 2, 30s)) << j.text();
  ASSERT_TRUE(j.waitForMatch(kOnDaemon, 2, 30s)) << j.text() << daemon_.log();
  std::this_thread::sleep_for(400ms);
  link(false, 0, 0, true);
  ASSERT_TRUE(j.waitForMatch("rank 0: rail 0 \\(rail0\\) down", 1, 30s)) << j.text();
  // Back up: the daemon's LinkUp (after its hold-down) fails back, and says so.
  link(true, 0, 0, true);
  ASSERT_TRUE(j.waitForMatch("rank 0: fail-back of .* source daemon", 1, 30s)) << j.text() << daemon_.log();
  expectAllOk(j);
  std::string t = j.text();
  EXPECT_EQ(matches(t, "rank 0: rail 0 \\(rail0\\) up again after hold-down; failing back \\(source daemon\\)"), 1) << t;
  EXPECT_EQ(matches(t, "fail-back of .* source nic-poll"), 0) << t;
  // recclCommGetStats names the source in use: the daemon and the hooks it runs.
  EXPECT_EQ(matches(t, "source rank [01] daemon daemon:[a-z_,]+"), 2) << t;
  EXPECT_EQ(matches(t, "rank 0: rail 0 \\(rail0\\) down \\(source daemon "), 1) << t;
  EXPECT_EQ(matches(t, "down \\(source (nic-poll|detector|stall)"), 0) << t;  // nobody else saw it first
  EXPECT_GE(matches(t, "rank 0: failover of rank [0-9]->[0-9] ch [0-9]+ rail [0-9]+ \\([^)]*\\) -> rail 1 .*source daemon"), 1) << t;
  EXPECT_GE(sumField(t, "failovers"), 2u) << t;  // both directions of the pair on rail 0
  EXPECT_EQ(matches(t, "reccl-detectord lost"), 0) << t;
  // The daemon's side: it watched the rank's NIC in the rank's namespace and reported the loss.
  EXPECT_GE(matches(daemon_.log(), "\"ifname\":\"rail0\"[^\n]*\"type\":\"link_down\""), 1) << daemon_.log();
}

// RECCL_DETECTOR=daemon and the daemon dies mid-run (SIGKILL: no goodbye): every rank notices,
// the NIC poll takes over at once, and a fault after that is still routed around exactly.
TEST_F(DaemonSource, KilledDaemonFallsBackToNicPoll) {
  Job j(testbed().name(), env("daemon", "WORKER_SECONDS=5 WORKER_COUNT=262144"), 120);
  ASSERT_TRUE(j.waitForMatch("started rank", 2, 30s)) << j.text();
  ASSERT_TRUE(j.waitForMatch(kOnDaemon, 2, 30s)) << j.text() << daemon_.log();
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(daemon_.stop(SIGKILL, 15000));
  ASSERT_TRUE(j.waitForMatch("reccl-detectord lost", 2, 30s)) << j.text();
  std::this_thread::sleep_for(200ms);
  link(false, 1, 0, true);
  EXPECT_TRUE(j.waitForMatch("rank 1: rail 0 \\(rail0\\) down", 1, 30s)) << j.text();
  EXPECT_TRUE(waitFailovers(j, 2)) << j.text();
  expectAllOk(j);
  std::string t = j.text();
  EXPECT_EQ(matches(t, "rank 1: rail 0 \\(rail0\\) down \\(source nic-poll"), 1) << t;
  EXPECT_EQ(matches(t, "source daemon"), 0) << t;
  EXPECT_GE(sumField(t, "failovers"), 2u) << t;
  EXPECT_EQ(matches(t, "source rank [01] nic-poll nic-poll"), 2) << t;
}

// RECCL_DETECTOR=daemon and the daemon hangs (SIGSTOP: its socket stays open, nothing is
// answered): the ranks' pings go unanswered, they drop it as if it died, the NIC poll takes
// over, and a fault after that is routed around exactly.
TEST_F(DaemonSource, HungDaemonFallsBackToNicPoll) {
  Job j(testbed().name(), env("daemon", "RECCL_DETECTORD_PING_MS=100 WORKER_SECONDS=5 WORKER_COUNT=262144"), 120);
  ASSERT_TRUE(j.waitForMatch("started rank", 2, 30s)) << j.text();
  ASSERT_TRUE(j.waitForMatch(kOnDaemon, 2, 30s)) << j.text() << daemon_.log();
  std::this_thread::sleep_for(300ms);
  daemon_.signal(SIGSTOP);
  auto t0 = Clock::now();
  bool lost = j.waitForMatch("reccl-detectord lost \\(detectord: no pong", 2, 30s);
  auto noticedMs = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  ASSERT_TRUE(lost) << j.text();
  // ping every 100 ms, pong deadline max(200, RECCL_DETECTORD_TIMEOUT_MS=200): ~300 ms, plus up
  // to 2.7 s of a loaded machine (both ranks must notice); a check that never fires takes 30 s.
  EXPECT_LT(noticedMs, 3000) << j.text();
  std::this_thread::sleep_for(200ms);
  link(false, 1, 0, true);
  EXPECT_TRUE(j.waitForMatch("rank 1: rail 0 \\(rail0\\) down", 1, 30s)) << j.text();
  EXPECT_TRUE(waitFailovers(j, 2)) << j.text();
  expectAllOk(j);
  std::string t = j.text();
  EXPECT_EQ(matches(t, "rank 1: rail 0 \\(rail0\\) down \\(source nic-poll"), 1) << t;
  EXPECT_GE(sumField(t, "failovers"), 2u) << t;
  EXPECT_EQ(matches(t, "source rank [01] nic-poll nic-poll"), 2) << t;
  daemon_.signal(SIGCONT);
}

// RECCL_DETECTOR=auto, the daemon stopped and started again on the same socket: a fault in
// between is caught by a fallback source (NIC poll, or the in-process detector once it runs),
// then the ranks take the daemon back and it catches the next fault.
TEST_F(DaemonSource, AutoTakesARestartedDaemonBack) {
  Job j(testbed().name(), env("auto", "WORKER_SECONDS=5 WORKER_COUNT=262144"), 150);
  ASSERT_TRUE(j.waitForMatch("started rank", 2, 30s)) << j.text();
  ASSERT_TRUE(j.waitForMatch(kOnDaemon, 2, 30s)) << j.text() << daemon_.log();
  ASSERT_TRUE(daemon_.stop(SIGTERM, 15000));
  ASSERT_TRUE(j.waitForMatch("reccl-detectord lost", 2, 30s)) << j.text();
  std::this_thread::sleep_for(200ms);
  link(false, 1, 1, true);
  ASSERT_TRUE(j.waitForMatch("rank 1: rail 1 \\(rail1\\) down \\(source (nic-poll|detector )", 1, 30s)) << j.text();
  link(true, 1, 1, true);
  ASSERT_TRUE(j.waitForMatch("rank 1: rail 1 \\(rail1\\) up again", 1, 30s)) << j.text();
  std::string err = daemon_.start();
  ASSERT_EQ(err, "");
  ASSERT_TRUE(j.waitForMatch(std::string(kOnDaemon) + ".* again", 2, 30s)) << j.text() << daemon_.log();
  std::this_thread::sleep_for(300ms);
  link(false, 0, 0, true);
  ASSERT_TRUE(j.waitForMatch("rank 0: rail 0 \\(rail0\\) down \\(source daemon ", 1, 30s)) << j.text() << daemon_.log();
  EXPECT_TRUE(waitFailovers(j, 4)) << j.text();
  expectAllOk(j);
  std::string t = j.text();
  EXPECT_GE(sumField(t, "failovers"), 4u) << t;
  EXPECT_GE(sumField(t, "failbacks"), 1u) << t;
}

// RECCL_DETECTOR=auto and the daemon gone for good: the in-process detector (BPF here) starts
// off the monitor thread and becomes the source. Loading BPF beside a running job on a busy
// host takes seconds; the job runs on until the test's wait (its stop file), however long.
TEST_F(DaemonSource, AutoFallsBackToTheInProcessDetector) {
  Job j(testbed().name(), env("auto", "WORKER_SECONDS=5 WORKER_COUNT=262144"), 150);
  ASSERT_TRUE(j.waitForMatch("started rank", 2, 30s)) << j.text();
  ASSERT_TRUE(j.waitForMatch(kOnDaemon, 2, 30s)) << j.text() << daemon_.log();
  ASSERT_TRUE(daemon_.stop(SIGKILL, 15000));
  ASSERT_TRUE(j.waitForMatch("fault source: in-process detector \\(.*\\) after losing", 2, 50s)) << j.text();
  std::this_thread::sleep_for(200ms);
  link(false, 0, 1, true);
  ASSERT_TRUE(j.waitForMatch("rank 0: rail 1 \\(rail1\\) down \\(source detector ", 1, 30s)) << j.text();
  EXPECT_TRUE(waitFailovers(j, 2)) << j.text();
  expectAllOk(j);
  EXPECT_GE(sumField(j.text(), "failovers"), 2u) << j.text();
}

}  // namespace
