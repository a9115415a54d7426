#include "core/handshake.h"

#include <sys/socket.h>

#include <cstring>
#include <vector>

#include "transport/socket_util.h"

namespace reccl::core {

Result<Nonce> sendChallenge(int fd, AuthPurpose purpose) {
  Nonce n = randomNonce();
  std::array<std::byte, kChallengeBytes> c;
  encodeChallenge(purpose, n, c);
  ssize_t w = ::send(fd, c.data(), c.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w != static_cast<ssize_t>(c.size()))
    return Status::FromErrno(w < 0 ? errno : EAGAIN, "sending the challenge");
  return n;
}

Status sendProof(int fd, const Key& key, const Nonce& clientNonce, const Nonce& serverNonce, Deadline deadline) {
  Tag t = proofTag(key, clientNonce, serverNonce);
  return transport::sendAll(fd, t, deadline).Wrap("sending the proof");
}

Result<Session> sendAuthHello(const ByteIo& io, Hello hello, const Key& key, AuthPurpose purpose,
                              std::span<const std::byte> then) {
  std::array<std::byte, kChallengeBytes> c;
  RECCL_TRY(io.recv(c).Wrap("waiting for the challenge"));
  RECCL_ASSIGN_OR_RETURN(Nonce server, decodeChallenge(c, purpose));
  std::vector<std::byte> out(kAuthHelloBytes + then.size());
  Session s = sealHello(hello, key, server, std::span<std::byte, kAuthHelloBytes>(out.data(), kAuthHelloBytes));
  if (!then.empty()) std::memcpy(out.data() + kAuthHelloBytes, then.data(), then.size());
  RECCL_TRY(io.send(out).Wrap("hello"));
  return s;
}

Status readProof(const ByteIo& io, const Key& key, const Session& s) {
  Tag t;
  RECCL_TRY(io.recv(t).Wrap("waiting for the proof"));
  if (!verifyProofTag(key, s.client, s.server, t))
    return Status(Errc::kPermission, "the acceptor does not hold this communicator's key");
  return Status::Ok();
}

}  // namespace reccl::core
