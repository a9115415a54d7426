// The origin's side of the relay control socket (relay_server.h serves the other): one request
// per relayed connection, authenticated like every connection of the communicator. The relay
// sends a challenge; the origin answers with one message (its hello sealed under the
// communicator's key, the RelayOpen, the pipe's memfd and two eventfds); the relay answers with
// a RelayReply that leads with the session's proof once the hello opened under its key. An
// answer without the proof is a refusal, whatever its status says.
#pragma once

#include <span>
#include <string>

#include "core/auth.h"
#include "core/handshake.h"
#include "failover/relay/relay_wire.h"
#include "reccl/common/deadline.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::failover {

// Connects to the relay's control socket `name` (abstract namespace), answers its challenge with
// the sealed `hello`, `open` and `fds` (memfd, origin wake, relay wake: passed, not closed) and
// returns the socket; `*session` is what the reply's proof must match.
Result<UniqueFd> openRelayControl(const std::string& name, const core::Hello& hello, const core::Key& key,
                                  std::span<const std::byte> open, const int (&fds)[3], Deadline dl,
                                  core::Session* session);

struct RelayAnswer {
  RelayReply reply;
  bool proven = false;  // the reply carried the session's proof under `key`
};
// Reads the relay's answer on `ctrl` (relay rank `via`, for messages). A proof that does not
// verify under `key` is an error: the relay does not hold this communicator's key.
Result<RelayAnswer> readRelayAnswer(int ctrl, const core::Key& key, const core::Session& session, int via,
                                    Deadline dl);

}  // namespace reccl::failover
