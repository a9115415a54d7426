// The monitor's fault-source choice (planSources) and the daemon client's deadlines: a missing,
// silent, backlogged or garbling daemon costs a job at most RECCL_DETECTORD_TIMEOUT_MS, never a hang.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "failover/health/daemon_source.h"
#include "failover/health/source_choice.h"
#include "reccl/common/unique_fd.h"

namespace {

using reccl::Errc;
using reccl::UniqueFd;
using reccl::failover::DaemonSource;
using reccl::failover::planSources;
using reccl::failover::RailNic;
using reccl::failover::SourceKind;
using Clock = std::chrono::steady_clock;

TEST(SourceChoice, OrderPerMode) {
  auto a = planSources("auto", true);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->order, (std::vector<SourceKind>{SourceKind::kDaemon, SourceKind::kInProcess, SourceKind::kPoll}));
  EXPECT_EQ(a->inProcessMode, "auto");
  EXPECT_TRUE(a->retryDaemon);

  // daemon: never BPF inside the job; the NIC poll covers while the daemon is away.
  auto d = planSources("daemon", true);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->order, (std::vector<SourceKind>{SourceKind::kDaemon, SourceKind::kPoll}));
  EXPECT_TRUE(d->retryDaemon);

  auto b = planSources("bpf", true);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->order, (std::vector<SourceKind>{SourceKind::kInProcess, SourceKind::kPoll}));
  EXPECT_EQ(b->inProcessMode, "bpf");
  EXPECT_FALSE(b->retryDaemon);

  for (const char* m : {"netlink", "rtnetlink"}) {
    auto n = planSources(m, true);
    ASSERT_TRUE(n.ok()) << m;
    EXPECT_EQ(n->inProcessMode, "netlink") << m;
    EXPECT_FALSE(n->retryDaemon) << m;
  }
  EXPECT_EQ(planSources("poll", true)->order, std::vector<SourceKind>{SourceKind::kPoll});
  EXPECT_EQ(planSources("none", true)->order, std::vector<SourceKind>{SourceKind::kNone});
}

TEST(SourceChoice, LoopbackOnlyHasNothingToWatch) {
  for (const char* m : {"auto", "daemon", "bpf", "poll"}) {
    auto p = planSources(m, false);
    ASSERT_TRUE(p.ok()) << m;
    EXPECT_EQ(p->order, std::vector<SourceKind>{SourceKind::kNone}) << m;
    EXPECT_FALSE(p->retryDaemon) << m;
  }
}

TEST(SourceChoice, UnknownModeIsRefusedNamingTheVariable) {
  for (const char* m : {"", "Auto", "ebpf", "daemon "}) {
    auto p = planSources(m, true);
    ASSERT_FALSE(p.ok()) << m;
    EXPECT_EQ(p.status().code(), Errc::kInvalidArgument);
    EXPECT_NE(p.status().message().find("RECCL_DETECTOR"), std::string::npos) << p.status().message();
  }
}

// A unix SOCK_SEQPACKET listener at a unique path, removed at the end.
class Listener {
 public:
  explicit Listener(int backlog) {
    path_ = "/tmp/reccl-srcchoice-" + std::to_string(getpid()) + "-" + std::to_string(counter_++) + ".sock";
    fd_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path_.c_str(), path_.size());
    unlink(path_.c_str());
    ok_ = fd_.valid() && bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
          listen(fd_.get(), backlog) == 0;
  }
  ~Listener() { unlink(path_.c_str()); }
  bool ok() const { return ok_; }
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

 private:
  inline static int counter_ = 0;
  std::string path_;
  UniqueFd fd_;
  bool ok_ = false;
};

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

const std::vector<RailNic> kNics = {{0, "lo"}};

TEST(DaemonClientDeadline, NoDaemonIsNotFoundAtOnce) {
  auto t0 = Clock::now();
  // A long deadline (5 s) keeps "at once" (under 2.5 s: room for a loaded machine) apart from
  // "waited the deadline out".
  auto d = DaemonSource::open("/tmp/reccl-srcchoice-none-" + std::to_string(getpid()) + ".sock", kNics, 5000);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Errc::kNotFound) << d.status().message();
  EXPECT_LT(msSince(t0), 2500.0);
}

TEST(DaemonClientDeadline, BadPathIsRefused) {
  auto d = DaemonSource::open(std::string(200, 'x'), kNics, 200);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Errc::kInvalidArgument) << d.status().message();
}

// A daemon that accepts (the kernel does, from the backlog) but never answers.
TEST(DaemonClientDeadline, SilentDaemonTimesOutWithinTheDeadline) {
  Listener l(8);
  ASSERT_TRUE(l.ok()) << strerror(errno);
  auto t0 = Clock::now();
  auto d = DaemonSource::open(l.path(), kNics, 150);
  double ms = msSince(t0);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Errc::kTimeout) << d.status().message();
  EXPECT_GE(ms, 140.0);
  EXPECT_LT(ms, 1000.0);
}

// A daemon that stopped accepting: once its backlog is full a blocking connect would wait
// forever; the client must come back within its deadline every time.
TEST(DaemonClientDeadline, FullBacklogNeverBlocks) {
  Listener l(0);
  ASSERT_TRUE(l.ok()) << strerror(errno);
  for (int k = 0; k < 4; ++k) {
    auto t0 = Clock::now();
    auto d = DaemonSource::open(l.path(), kNics, 100);
    double ms = msSince(t0);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), Errc::kTimeout) << k << ": " << d.status().message();
    EXPECT_LT(ms, 1000.0) << k;
  }
}

// Something that is not reccl-detectord answers on the socket.
TEST(DaemonClientDeadline, ForeignPeerIsAProtocolError) {
  Listener l(8);
  ASSERT_TRUE(l.ok()) << strerror(errno);
  std::thread peer([&] {
    int c = accept4(l.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    UniqueFd conn(c);
    char buf[512];
    if (recv(c, buf, sizeof(buf), 0) <= 0) return;
    const char garbage[] = "HTTP/1.0 200 OK\r\n\r\n";
    (void)!send(c, garbage, sizeof(garbage) - 1, MSG_NOSIGNAL);
    (void)!recv(c, buf, sizeof(buf), 0);  // until the client hangs up
  });
  auto d = DaemonSource::open(l.path(), kNics, 1000);  // a failed open hangs up: the peer thread ends
  peer.join();
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Errc::kProtocol) << d.status().message();
}

}  // namespace
