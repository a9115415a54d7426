// The bootstrap's frames and its sealed table payload, which both ends build and read: a root
// sends the rank table (and the communicator secret, sealed) to its ranks, a block's leader
// brings the full table back to its root in the same layout under another tag's label
// (core/bootstrap.cpp: the root; core/bootstrap_exchange.cpp: a rank's side).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/auth.h"
#include "core/wire.h"
#include "reccl/common/status.h"

namespace reccl::core {

// The most bytes a table of nranks ranks' records takes in a frame.
size_t maxTableBytes(int nranks);

// A root frame: its header, then `payload`.
std::vector<std::byte> rootFrame(RootFrame type, std::span<const std::byte> payload);

using TableTagFn = Tag (*)(const Key&, const Nonce&, const Nonce&, std::span<const std::byte>);

// The table's bytes and the secret sealed for one connection (its two nonces), tagged by `tagOf`.
std::vector<std::byte> sealedTable(std::span<const std::byte> blob, const CommSecret& secret, const Key& bootKey,
                                   const Nonce& client, const Nonce& server, TableTagFn tagOf);

struct OpenedTable {
  std::span<const std::byte> blob;  // the rank table's bytes, inside the payload
  std::vector<RankInfo> table;
  CommSecret secret;
};
// The other end of sealedTable: the tag checked first, then the table and the secret.
Result<OpenedTable> openTable(std::span<const std::byte> body, int nranks, const Key& bootKey, const Nonce& client,
                              const Nonce& server, TableTagFn tagOf);

}  // namespace reccl::core
