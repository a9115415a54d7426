// The origin's side of the relay control socket (relay_control.h).
#include "failover/relay/relay_control.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

namespace reccl::failover {

Result<UniqueFd> openRelayControl(const std::string& name, const core::Hello& hello, const core::Key& key,
                                  std::span<const std::byte> open, const int (&fds)[3], Deadline dl,
                                  core::Session* session) {
  UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!s) return Status::FromErrno(errno, "relay control: socket");
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  size_t n = std::min(name.size(), sizeof(a.sun_path) - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  if (connect(s.get(), reinterpret_cast<sockaddr*>(&a), len) != 0)
    return Status::FromErrno(errno, "relay control: connect @" + name);
  std::array<std::byte, core::kChallengeBytes> ch;
  pollfd pf{s.get(), POLLIN, 0};
  if (::poll(&pf, 1, std::max(0, dl.remainingMsForPoll())) <= 0 ||
      ::recv(s.get(), ch.data(), ch.size(), MSG_DONTWAIT) != static_cast<ssize_t>(ch.size()))
    return Status(Errc::kTimeout, "relay control: no challenge from @" + name);
  RECCL_ASSIGN_OR_RETURN(core::Nonce server, core::decodeChallenge(ch, core::AuthPurpose::kRelay));
  std::vector<std::byte> msg(core::kAuthHelloBytes + open.size());
  *session = core::sealHello(hello, key, server, std::span<std::byte, core::kAuthHelloBytes>(msg.data(), core::kAuthHelloBytes));
  std::memcpy(msg.data() + core::kAuthHelloBytes, open.data(), open.size());
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(fds))] = {};
  iovec iov{msg.data(), msg.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = cbuf;
  m.msg_controllen = sizeof(cbuf);
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(c), fds, sizeof(fds));
  if (sendmsg(s.get(), &m, MSG_NOSIGNAL) != static_cast<ssize_t>(msg.size()))
    return Status::FromErrno(errno, "relay control: sendmsg");
  return s;
}

Result<RelayAnswer> readRelayAnswer(int ctrl, const core::Key& key, const core::Session& session, int via,
                                    Deadline dl) {
  pollfd pf{ctrl, POLLIN, 0};
  int rc = ::poll(&pf, 1, std::max(0, dl.remainingMsForPoll()));
  std::array<std::byte, core::kTagBytes + kRelayReplyBytes + 1> rb;
  ssize_t n = rc > 0 ? ::recv(ctrl, rb.data(), rb.size(), MSG_DONTWAIT) : -1;
  if (n <= 0) return Status(Errc::kTimeout, "relay rank " + std::to_string(via) + " did not answer");
  auto body = std::span<const std::byte>(rb.data(), static_cast<size_t>(n));
  RelayAnswer a;
  a.proven = body.size() == core::kTagBytes + kRelayReplyBytes;
  if (a.proven && !core::verifyProofTag(key, session.client, session.server, body.first(core::kTagBytes)))
    return Status(Errc::kPermission, "relay rank " + std::to_string(via) + " does not hold this communicator's key");
  RECCL_ASSIGN_OR_RETURN(a.reply, decodeRelayReply(a.proven ? body.subspan(core::kTagBytes) : body));
  return a;
}

}  // namespace reccl::failover
