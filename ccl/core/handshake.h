// The connection handshake of core/auth.h on real byte streams: the acceptor's three steps
// (challenge, check, proof), which its event loop drives without blocking, and the connecting
// side's two, over any stream (a socket, or the relay pipe a migration runs through).
#pragma once

#include <span>

#include "core/auth.h"
#include "core/wire.h"
#include "reccl/common/deadline.h"
#include "reccl/common/status.h"
#include "transport/byte_io.h"
#include "transport/socket_util.h"

namespace reccl::core {

// A byte stream with deadlines already bound in (transport/byte_io.h), and one over a socket.
using transport::ByteIo;
using transport::socketIo;

// Acceptor: sends the challenge on a freshly accepted socket (24 bytes: they fit any new
// socket's buffer, so this never blocks).
Result<Nonce> sendChallenge(int fd, AuthPurpose purpose);
// Acceptor: the proof that it holds the key too; the connecting side reads it first.
Status sendProof(int fd, const Key& key, const Nonce& clientNonce, const Nonce& serverNonce, Deadline deadline);

// Reads the challenge, then sends the sealed hello with `then` right behind it in one write.
Result<Session> sendAuthHello(const ByteIo& io, Hello hello, const Key& key, AuthPurpose purpose,
                              std::span<const std::byte> then = {});
// Reads and checks the acceptor's proof.
Status readProof(const ByteIo& io, const Key& key, const Session& s);

}  // namespace reccl::core
