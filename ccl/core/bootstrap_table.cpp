#include "core/bootstrap_table.h"

#include <algorithm>
#include <cstring>

#include "channel/wire_bytes.h"

namespace reccl::core {

using channel::get;
using channel::put;

size_t maxTableBytes(int nranks) { return kMaxRankInfoBytes * static_cast<size_t>(std::max(nranks, 1)) + 4096; }

// A root frame: its header, then `payload`.
std::vector<std::byte> rootFrame(RootFrame type, std::span<const std::byte> payload) {
  std::vector<std::byte> out(kRootFrameHeaderBytes + payload.size());
  encodeRootFrameHeader(RootFrameHeader{type, static_cast<uint32_t>(payload.size())},
                        std::span<std::byte, kRootFrameHeaderBytes>(out.data(), kRootFrameHeaderBytes));
  std::memcpy(out.data() + kRootFrameHeaderBytes, payload.data(), payload.size());
  return out;
}

// A table's payload ([u32 table length][rank table][sealed secret][tag]) for one connection, and
// its reading: the root's table to a rank (tableTag) and a leader's back to its root
// (leaderTableTag) differ only in the tag's label.
std::vector<std::byte> sealedTable(std::span<const std::byte> blob, const CommSecret& secret, const Key& bootKey,
                                   const Nonce& client, const Nonce& server, TableTagFn tagOf) {
  std::vector<std::byte> body(4 + blob.size() + kSealedCommSecretBytes);
  put<uint32_t>(body.data(), 0, static_cast<uint32_t>(blob.size()));
  std::memcpy(body.data() + 4, blob.data(), blob.size());
  sealCommSecret(secret, bootKey, client, server,
                 std::span<std::byte, kSealedCommSecretBytes>(body.data() + 4 + blob.size(), kSealedCommSecretBytes));
  const Tag t = tagOf(bootKey, client, server, body);
  body.insert(body.end(), t.begin(), t.end());
  return body;
}

Result<OpenedTable> openTable(std::span<const std::byte> body, int nranks, const Key& bootKey, const Nonce& client,
                              const Nonce& server, TableTagFn tagOf) {
  const auto signedPart = body.first(body.size() - kTagBytes);  // the header's length check leaves room
  if (!equalTags(body.last(kTagBytes), tagOf(bootKey, client, server, signedPart)))
    return Status(Errc::kPermission, "the table does not carry this job's secret (the sender lacks its key)");
  const uint32_t tlen = get<uint32_t>(signedPart.data(), 0);
  if (tlen != signedPart.size() - 4 - kSealedCommSecretBytes) return Status(Errc::kProtocol, "bad table frame");
  OpenedTable out;
  out.blob = signedPart.subspan(4, tlen);
  RECCL_ASSIGN_OR_RETURN(out.table, decodeRankTable(out.blob, nranks));
  RECCL_ASSIGN_OR_RETURN(out.secret, openCommSecret(signedPart.subspan(4 + tlen), bootKey, client, server));
  return out;
}

}  // namespace reccl::core
