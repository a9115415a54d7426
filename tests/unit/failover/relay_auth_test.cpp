// The relay control socket is authenticated like every other connection of a communicator: a
// process of the job's user that reaches a rank's relay socket (its name is made of the pid and
// the communicator id, neither of them secret) but does not hold the communicator's key gets a
// refusal without the session's proof, and nothing is forwarded. The real server and the real
// origin-side client (relay_control.h), over a real abstract unix socket.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>

#include "core/auth.h"
#include "core/handshake.h"
#include "failover/relay/relay_control.h"
#include "failover/relay/relay_server.h"
#include "failover/relay/relay_wire.h"

namespace reccl::failover {
namespace {

constexpr uint64_t kCommId = 0x5eed'0000'0000'0042ull;

struct Fds {
  int p[2] = {-1, -1};
  int e[2] = {-1, -1};
  Fds() {
    EXPECT_EQ(pipe(p), 0);
    EXPECT_EQ(pipe(e), 0);
  }
  ~Fds() {
    for (int fd : {p[0], p[1], e[0], e[1]}) close(fd);
  }
  // Three descriptors for the request (the server owns its copies and closes them on refusal).
  void three(int (&out)[3]) const { out[0] = p[0], out[1] = p[1], out[2] = e[0]; }
};

class RelayAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = core::randomKey();
    RelayServerConfig cfg;
    cfg.rank = 1;
    cfg.nranks = 3;
    cfg.key = key_;
    cfg.commId = kCommId;
    cfg.pid = static_cast<uint32_t>(getpid());
    cfg.hostOf = {0, 0, 1};  // ranks 0 and 1 share a host; rank 2 is elsewhere
    cfg.railUp = [](int) { return true; };
    cfg.railsUp = [] { return uint64_t{1}; };
    cfg.broken = [] { return false; };
    auto s = RelayServer::create(std::move(cfg));
    ASSERT_TRUE(s.ok()) << s.status().message();
    server_ = std::move(s).value();
  }

  // One request to the server as rank `origin`, sealed under `key`: the answer.
  Result<RelayAnswer> ask(int origin, const core::Key& key) {
    core::Hello h;
    h.kind = core::HelloKind::kTcpData;
    h.commId = kCommId;
    h.srcRank = origin;
    h.dstRank = 1;
    h.nranks = 3;
    h.channel = 0;
    h.epoch = 1;
    RelayOpen open;
    open.conn = {origin, 2, 0};
    open.peer = 2;
    open.rail = 0;
    std::array<std::byte, kRelayOpenBytes> om;
    encodeRelayOpen(open, om);
    Fds fds;
    int three[3];
    fds.three(three);
    core::Session session;
    auto ctrl = openRelayControl(RelayServer::socketName(static_cast<uint32_t>(getpid()), kCommId, 1), h, key, om,
                                 three, Deadline::afterMs(5000), &session);
    if (!ctrl.ok()) return ctrl.status();
    return readRelayAnswer(ctrl->get(), key, session, 1, Deadline::afterMs(5000));
  }

  core::Key key_{};
  std::unique_ptr<RelayServer> server_;
};

// Without the key (a zero key, one derived from the public launcher values, a random one), the
// relay refuses without proving anything and forwards nothing.
TEST_F(RelayAuth, AHelloWithoutTheCommunicatorsKeyIsRefusedUnproven) {
  std::string material = "127.0.0.1:29500/3";
  std::array<core::Key, 3> guesses = {core::Key{},
                                      core::deriveJobKey(std::as_bytes(std::span(material.data(), material.size()))),
                                      core::randomKey()};
  for (size_t g = 0; g < guesses.size(); ++g) {
    auto a = ask(0, guesses[g]);
    ASSERT_TRUE(a.ok()) << "guess " << g << ": " << a.status().message();
    EXPECT_FALSE(a->proven) << "guess " << g << ": the relay proved a session to a stranger";
    EXPECT_EQ(a->reply.status, RelayStatus::kRefused) << "guess " << g;
  }
  EXPECT_EQ(server_->pipesServed(), 0u);
}

// The control case: the same request under the communicator's key opens (the answer carries the
// proof), and the relay judges the request itself: an origin on another host is refused, proven.
TEST_F(RelayAuth, TheCommunicatorsKeyOpensTheRequest) {
  auto a = ask(2, key_);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(a->proven);
  EXPECT_EQ(a->reply.status, RelayStatus::kRefused);  // rank 2 is not on the relay's host
  EXPECT_EQ(server_->pipesServed(), 0u);
}

}  // namespace
}  // namespace reccl::failover
