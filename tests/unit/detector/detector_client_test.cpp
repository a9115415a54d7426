// DetectorClient against a scripted peer on a real unix socket: what the client does with every
// message a daemon may send before it dies or when it sends garbage. Nothing received may be
// dropped, nothing malformed may pass as valid, nothing may throw, and a peer that stops
// answering pings is reported within the deadline.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <thread>

#include "reccl/common/deadline.h"
#include "reccl/common/unique_fd.h"
#include "reccl/detector/daemon_protocol.h"
#include "reccl/detector/detector_client.h"

namespace reccl::detector {
namespace {

// A listening SOCK_SEQPACKET socket and one thread that accepts one client, answers its hello
// and then runs `script` on the connection.
class ScriptedDaemon {
 public:
  // `helloReply`: what it answers the client's hello with (empty: a daemon's own hello).
  explicit ScriptedDaemon(std::function<void(int)> script, std::string helloReply = "") {
    if (helloReply.empty())
      helloReply = R"({"op":"hello","version":)" + std::to_string(kDaemonProtocolVersion) + R"(,"mode":"test","sources":[]})";
    static int n = 0;
    path_ = "/tmp/reccl-dclient-" + std::to_string(getpid()) + "-" + std::to_string(n++) + ".sock";
    unlink(path_.c_str());
    listen_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path_.c_str(), path_.size());
    ok_ = listen_ && bind(listen_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
          listen(listen_.get(), 4) == 0;
    if (!ok_) return;
    thread_ = std::thread([this, script = std::move(script), helloReply] {
      UniqueFd c(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      accepted_ = true;
      if (!c) return;
      auto hello = recvMessage(c.get());
      if (!hello.ok()) return;
      (void)sendMessage(c.get(), helloReply);
      script(c.get());
    });
  }
  ~ScriptedDaemon() {
    // A test that failed before its client connected: a connection of our own (closed at once,
    // so the hello read fails) ends the accept, or the join would hang the test.
    if (thread_.joinable() && !accepted_) {
      UniqueFd poke(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::memcpy(a.sun_path, path_.c_str(), path_.size());
      if (poke) (void)!connect(poke.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
    }
    if (thread_.joinable()) thread_.join();
    unlink(path_.c_str());
  }
  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  UniqueFd listen_;
  bool ok_ = false;
  std::atomic<bool> accepted_{false};
  std::thread thread_;
};

std::string event(const char* type, int ifindex) {
  LinkEvent e;
  e.type = std::string(type) == "up" ? LinkEventType::kLinkUp : LinkEventType::kLinkDown;
  e.link = {4026531840u, static_cast<uint32_t>(ifindex)};
  e.ifname = "rail" + std::to_string(ifindex);
  e.signalNs = 1000 + ifindex;
  return eventToJson(e);
}

// Collects events until an error or the deadline; returns the error (Ok when none came).
Status drain(DetectorClient& c, std::vector<LinkEvent>* out, int ms) {
  Deadline dl = Deadline::afterMs(ms);
  while (!dl.expired()) {
    Status st = c.receive(dl.remainingMsForPoll(), out);
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

// A hello the daemon refuses is an error naming the daemon's reason, not a connection.
TEST(DetectorClient, ARefusedHelloIsAnErrorWithTheDaemonsReason) {
  ScriptedDaemon d([](int) {}, R"({"op":"hello","version":)" + std::to_string(kDaemonProtocolVersion) +
                                   R"(,"ok":false,"error":"not today"})");
  ASSERT_TRUE(d.ok());
  auto c = DetectorClient::connect(d.path(), 2000);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::kProtocol);
  EXPECT_NE(c.status().message().find("hello refused: not today"), std::string::npos) << c.status().ToString();
}

// A request the daemon answers with op "error" (one it could not take at all) fails with the
// daemon's reason, not as an unexpected message.
TEST(DetectorClient, ARequestRefusedAsAnErrorCarriesTheDaemonsReason) {
  ScriptedDaemon d([](int) {}, R"({"op":"error","version":)" + std::to_string(kDaemonProtocolVersion) +
                                   R"(,"ok":false,"error":"detectord: request is not a JSON object"})");
  ASSERT_TRUE(d.ok());
  auto c = DetectorClient::connect(d.path(), 2000);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("hello refused: detectord: request is not a JSON object"), std::string::npos)
      << c.status().ToString();
}

TEST(DetectorClient, EventsBeforeTheDaemonClosesAreHandedOver) {
  ScriptedDaemon d([](int fd) {
    (void)sendMessage(fd, event("down", 1));
    (void)sendMessage(fd, event("down", 2));
    // then close: a daemon killed right after writing
  });
  ASSERT_TRUE(d.ok());
  auto c = DetectorClient::connect(d.path(), 2000);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  usleep(50000);  // both events and the close are queued on the socket before the first read
  std::vector<LinkEvent> got;
  Status st = drain(*c.value(), &got, 2000);
  EXPECT_EQ(st.code(), Errc::kAborted) << st.ToString();
  ASSERT_EQ(got.size(), 2u) << "events lost with the connection";
  EXPECT_EQ(got[0].link.ifindex, 1u);
  EXPECT_EQ(got[1].link.ifindex, 2u);
}

TEST(DetectorClient, AGarbledMessageIsAnErrorAfterTheEventsBeforeIt) {
  // A truncated JSON object, an event of an unknown type, an event whose field has the wrong
  // type (nlohmann would throw), a message that is not an object: each is an error, never a
  // silent skip, and the event before it is kept.
  const std::vector<std::string> garbage = {
      R"({"op":"event","type":"link_do)",
      R"({"op":"event","type":"link_sideways","ifindex":3})",
      R"({"op":"event","type":"link_down","ifindex":"three"})",
      R"(["op","event"])",
  };
  for (const auto& g : garbage) {
    ScriptedDaemon d([&g](int fd) {
      (void)sendMessage(fd, event("down", 1));
      (void)sendMessage(fd, g);
      (void)sendMessage(fd, event("up", 1));
      usleep(300000);  // keep the connection open: the error must come from the message
    });
    ASSERT_TRUE(d.ok());
    auto c = DetectorClient::connect(d.path(), 2000);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    usleep(50000);
    std::vector<LinkEvent> got;
    Status st = drain(*c.value(), &got, 5000);  // ends at the error; the deadline is for a loaded machine
    EXPECT_EQ(st.code(), Errc::kProtocol) << g.substr(0, 60) << ": " << st.ToString();
    ASSERT_GE(got.size(), 1u) << g.substr(0, 60) << ": the event before the garbage was lost";
    EXPECT_EQ(got[0].type, LinkEventType::kLinkDown);
    EXPECT_EQ(got.size(), 1u) << "read past a garbled message";
  }
}

TEST(DetectorClient, KeepAliveGetsPongsAndReportsAPeerThatStopsAnswering) {
  // Answers pings for 400 ms, then reads nothing more (a hung daemon: socket open, no answers).
  ScriptedDaemon d([](int fd) {
    Deadline answer = Deadline::afterMs(400);
    while (!answer.expired()) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, answer.remainingMsForPoll()) <= 0) continue;
      auto m = recvMessage(fd);
      if (!m.ok()) return;
      auto seq = m->find("\"seq\":");
      (void)sendMessage(fd, R"({"op":"ping","seq":)" + m->substr(seq + 6, m->find('}') - seq - 6) + "}");
    }
    // Hung: nothing read or answered until the client closes (or 5 s).
    pollfd hup{fd, POLLRDHUP, 0};
    (void)poll(&hup, 1, 5000);
  });
  ASSERT_TRUE(d.ok());
  auto c = DetectorClient::connect(d.path(), 2000);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  DetectorClient& cl = *c.value();
  Deadline dl = Deadline::afterMs(2900);
  Status st;
  uint64_t failedAtNs = 0;
  const uint64_t startNs = monotonicNs();
  while (!dl.expired()) {
    std::vector<LinkEvent> ev;
    st = cl.receive(5, &ev);
    if (st.ok()) st = cl.keepAlive(50, 200);
    if (!st.ok()) {
      failedAtNs = monotonicNs();
      break;
    }
  }
  EXPECT_GE(cl.pongs(), 3u) << "pings not answered while the peer answered";
  ASSERT_EQ(st.code(), Errc::kTimeout) << st.ToString();
  EXPECT_NE(st.message().find("no pong"), std::string::npos) << st.message();
  // Answers stop at 400 ms; the next ping goes out within 50 ms and is late 200 ms after that
  // (~650 ms), plus up to 1.35 s of a loaded machine; a check that never fires runs 2.9 s.
  double ms = (failedAtNs - startNs) / 1e6;
  EXPECT_GT(ms, 400);
  EXPECT_LT(ms, 2000) << "hung peer noticed late";
}

}  // namespace
}  // namespace reccl::detector
