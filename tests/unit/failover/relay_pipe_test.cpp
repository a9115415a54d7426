// The relay's shared-memory pipe (byte rings across a fork) and its request wire format.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <thread>
#include <vector>

#include "failover/relay/relay_pipe.h"
#include "failover/relay/relay_wire.h"

namespace reccl::failover {
namespace {

TEST(RelayRing, WrapsAndKeepsOrder) {
  auto p = RelayPipe::create(64 * 1024);
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto up = p->up();
  std::vector<std::byte> in(50000), out(50000);
  uint64_t total = 0;
  for (int round = 0; round < 10; ++round) {  // 500 kB through a 64 KiB ring: wraps many times
    for (size_t i = 0; i < in.size(); ++i) in[i] = std::byte(static_cast<uint8_t>((total + i) * 7 + 3));
    ASSERT_EQ(up.write(in), in.size());
    EXPECT_EQ(up.used(), in.size());
    std::vector<std::byte> hdr(64);
    ASSERT_TRUE(up.peek(hdr));
    EXPECT_EQ(hdr[0], in[0]);
    ASSERT_EQ(up.read(out), out.size());
    EXPECT_EQ(in, out);
    total += in.size();
  }
  EXPECT_EQ(up.used(), 0u);
}

TEST(RelayRing, FullRingTakesNoMore) {
  auto p = RelayPipe::create(64 * 1024);
  ASSERT_TRUE(p.ok());
  auto down = p->down();
  std::vector<std::byte> big(100000, std::byte{1});
  EXPECT_EQ(down.write(big), 64u * 1024);
  EXPECT_EQ(down.free(), 0u);
  EXPECT_TRUE(down.writable().empty());
  EXPECT_EQ(down.write(big), 0u);
  EXPECT_EQ(p->up().used(), 0u);  // the other direction is untouched
}

TEST(RelayPipe, AttachRefusesForeignMemory) {
  auto p = RelayPipe::create(64 * 1024);
  ASSERT_TRUE(p.ok());
  // Not a memfd of the right size.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  auto bad = RelayPipe::attach(UniqueFd(fds[0]), UniqueFd(-1), UniqueFd(-1));
  close(fds[1]);
  EXPECT_FALSE(bad.ok());
  // Right size, wrong header.
  UniqueFd m(memfd_create("x", MFD_CLOEXEC));
  ASSERT_EQ(ftruncate(m.get(), kRelayPipeHeaderBytes + 2 * 64 * 1024), 0);
  auto zero = RelayPipe::attach(std::move(m), UniqueFd(-1), UniqueFd(-1));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("bad header"), std::string::npos);
}

// The relay writes its last bytes and closes its control socket without a wake-up: the read
// takes those bytes (a socket delivers what came before its FIN), and only a read past them fails.
TEST(RelayPipe, ReadTakesBytesWrittenBeforeTheRelayClosed) {
  auto p = RelayPipe::create(64 * 1024);
  ASSERT_TRUE(p.ok());
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd originCtrl(sv[0]), relayCtrl(sv[1]);
  std::vector<std::byte> sent(3000);
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = std::byte(static_cast<uint8_t>(i * 31 + 7));
  ASSERT_EQ(p->down().write(std::span<const std::byte>(sent).first(1000)), 1000u);
  std::thread relay([&] {
    usleep(100 * 1000);  // the origin has read the first 1000 bytes and waits in poll
    p->down().write(std::span<const std::byte>(sent).subspan(1000));
    relayCtrl.reset();
  });
  std::vector<std::byte> got(sent.size());
  Status s = p->readAll(got, originCtrl.get(), Deadline::afterMs(10000));
  relay.join();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(got, sent);
  std::vector<std::byte> more(1);
  Status past = p->readAll(more, originCtrl.get(), Deadline::afterMs(10000));
  EXPECT_EQ(past.code(), Errc::kLinkFailure) << past.message();
}

// 8 MB each way between two processes through 64 KiB rings, woken only by the eventfds.
TEST(RelayPipe, CrossProcessStreamIsExact) {
  auto p = RelayPipe::create(64 * 1024);
  ASSERT_TRUE(p.ok());
  constexpr size_t kBytes = 8 << 20;
  auto pattern = [](uint64_t i) { return std::byte(static_cast<uint8_t>(i * 2654435761u >> 13)); };
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The "relay": dup the descriptors as a receiver of SCM_RIGHTS would hold them.
    auto r = RelayPipe::attach(UniqueFd(dup(p->memFd())), UniqueFd(dup(p->originWakeFd())),
                               UniqueFd(dup(p->relayWakeFd())));
    if (!r.ok()) _exit(2);
    auto up = r->up();
    auto down = r->down();
    size_t got = 0;
    std::vector<std::byte> buf(10000);
    while (got < kBytes) {
      RelayPipe::drainWake(r->relayWakeFd());
      size_t n = up.read(buf);
      for (size_t i = 0; i < n; ++i)
        if (buf[i] != pattern(got + i)) _exit(3);
      // Echo it back down unchanged (what the relay does with the peer's bytes).
      size_t off = 0;
      while (off < n) {
        size_t w = down.write(std::span<const std::byte>(buf).subspan(off, n - off));
        off += w;
        r->wakeOrigin();
        if (off < n) usleep(50);
      }
      got += n;
      if (n) r->wakeOrigin();
      else usleep(50);
    }
    _exit(0);
  }
  std::vector<std::byte> out(kBytes);
  for (size_t i = 0; i < kBytes; ++i) out[i] = pattern(i);
  std::vector<std::byte> back(kBytes);
  // Write all and read all concurrently from this process: write in pieces, read what comes.
  size_t sent = 0, recvd = 0;
  auto deadline = Deadline::afterMs(20000);
  while (recvd < kBytes && !deadline.expired()) {
    if (sent < kBytes) {
      size_t n = p->up().write(std::span<const std::byte>(out).subspan(sent, std::min<size_t>(30000, kBytes - sent)));
      sent += n;
      if (n) p->wakeRelay();
    }
    size_t n = p->down().read(std::span<std::byte>(back).subspan(recvd));
    recvd += n;
    if (n) p->wakeRelay();
    if (!n) usleep(20);
  }
  int st = 0;
  waitpid(child, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  ASSERT_EQ(recvd, kBytes);
  EXPECT_TRUE(back == out);
}

TEST(RelayWire, OpenRoundTripAndChecks) {
  RelayOpen o;
  o.conn = ConnId{1, 2, 3};
  o.peer = 2;
  o.rail = 1;
  std::array<std::byte, kRelayOpenBytes> b;
  encodeRelayOpen(o, b);
  auto d = decodeRelayOpen(b, 1, 4);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->conn, o.conn);
  EXPECT_EQ(d->peer, 2);
  EXPECT_EQ(d->rail, 1);
  // The origin as receiver: the peer is the sender.
  o.conn = ConnId{2, 1, 0};
  encodeRelayOpen(o, b);
  EXPECT_TRUE(decodeRelayOpen(b, 1, 4).ok());
  // Someone else's connection, or a peer that is not its other end: refused.
  EXPECT_FALSE(decodeRelayOpen(b, 3, 4).ok());
  o.peer = 3;
  encodeRelayOpen(o, b);
  EXPECT_FALSE(decodeRelayOpen(b, 1, 4).ok());
  // Ranks out of range, short input.
  o.peer = 2;
  encodeRelayOpen(o, b);
  EXPECT_FALSE(decodeRelayOpen(b, 1, 2).ok());
  EXPECT_FALSE(decodeRelayOpen(std::span<const std::byte>(b).first(10), 1, 4).ok());
}

TEST(RelayWire, ReplyRoundTrip) {
  RelayReply r{RelayStatus::kRailDown, 0x5};
  std::array<std::byte, kRelayReplyBytes> b;
  encodeRelayReply(r, b);
  auto d = decodeRelayReply(b);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->status, RelayStatus::kRailDown);
  EXPECT_EQ(d->railsUp, 0x5u);
  b[4] = std::byte{9};
  EXPECT_FALSE(decodeRelayReply(b).ok());
}

TEST(RelayWire, MutatedRequestsNeverCrashAndReencodeIdentically) {
  RelayOpen o;
  o.conn = ConnId{0, 5, 2};
  o.peer = 5;
  o.rail = 3;
  std::array<std::byte, kRelayOpenBytes> base;
  encodeRelayOpen(o, base);
  std::mt19937 rng(7);
  int accepted = 0;
  for (int i = 0; i < 100000; ++i) {
    auto m = base;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) m[rng() % m.size()] = std::byte(static_cast<uint8_t>(rng()));
    auto d = decodeRelayOpen(m, 0, 8);
    if (!d.ok()) continue;
    ++accepted;
    std::array<std::byte, kRelayOpenBytes> again;
    encodeRelayOpen(*d, again);
    ASSERT_EQ(again, m);
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace reccl::failover
