// A rank's side of the bootstrap: its hello and records to its root, the table (and the
// communicator secret) back; a block's leader carries its block to root 0 and the full table back
// to its own root (core/bootstrap.h). The root's side: core/bootstrap.cpp.
#include <netinet/in.h>
#include <poll.h>
#include <sodium.h>
#include <sys/socket.h>

#include <array>
#include <cstring>

#include "channel/wire_bytes.h"
#include "core/bootstrap.h"
#include "core/bootstrap_table.h"
#include "core/handshake.h"
#include "reccl/common/log.h"

namespace reccl::core {

using channel::get;
using channel::put;

namespace {

// The connecting side of one root connection: the hello sent with `records` behind it.
struct RootLink {
  UniqueFd fd;
  Session session;
  std::string where;
};

Result<RootLink> helloRoot(const UniqueIdData& id, Hello hello, const std::function<Result<std::vector<std::byte>>(uint32_t)>& records,
                           Deadline deadline) {
  RootLink l;
  const transport::Endpoint root{id.addr, id.port};
  l.where = "bootstrap root " + root.str();
  RECCL_ASSIGN_OR_RETURN(l.fd, transport::connectTcp(root, 0, "", deadline));
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&local), &len);
  RECCL_ASSIGN_OR_RETURN(std::vector<std::byte> blob, records(local.sin_addr.s_addr));
  std::vector<std::byte> then(4 + blob.size());
  put<uint32_t>(then.data(), 0, static_cast<uint32_t>(blob.size()));
  std::memcpy(then.data() + 4, blob.data(), blob.size());
  hello.jobId = id.jobId;
  hello.dstRank = -1;
  auto session = sendAuthHello(socketIo(l.fd.get(), deadline), hello, id.bootKey, AuthPurpose::kBootstrap, then);
  if (!session.ok()) return session.status().Wrap(l.where);
  l.session = *session;
  return l;
}

// A frame from the root (header, then body), refusals turned into their reason.
Result<std::vector<std::byte>> readRootFrame(const RootLink& l, RootFrame want, int rank, int nranks, Deadline deadline) {
  ByteIo io = socketIo(l.fd.get(), deadline);
  std::array<std::byte, kRootFrameHeaderBytes> hb;
  Status s = io.recv(hb);
  if (!s.ok()) {
    if (s.code() == Errc::kTimeout)
      return Status(Errc::kTimeout, "bootstrap: not every rank joined " + l.where + " before RECCL_BOOTSTRAP_TIMEOUT_MS");
    return s.Wrap(l.where + ": waiting for the rank table");
  }
  RECCL_ASSIGN_OR_RETURN(RootFrameHeader h,
                         decodeRootFrameHeader(hb, maxTableBytes(nranks)));
  std::vector<std::byte> body(h.length);
  RECCL_TRY(io.recv(body).Wrap(l.where + ": rank table"));
  if (h.type == RootFrame::kRefused)
    return Status(Errc::kInvalidUsage, l.where + " refused rank " + std::to_string(rank) + ": " +
                                           std::string(reinterpret_cast<const char*>(body.data()), body.size()));
  if (h.type != want) return Status(Errc::kProtocol, l.where + ": an unexpected frame");
  return body;
}

Result<BootstrapResult> readTable(const RootLink& l, const UniqueIdData& id, int rank, int nranks, Deadline deadline,
                                  std::vector<std::byte>* blobOut = nullptr) {
  RECCL_ASSIGN_OR_RETURN(std::vector<std::byte> body, readRootFrame(l, RootFrame::kTable, rank, nranks, deadline));
  auto opened = openTable(body, nranks, id.bootKey, l.session.client, l.session.server, tableTag);
  if (!opened.ok()) return opened.status().Wrap(l.where);
  if (blobOut) blobOut->assign(opened->blob.begin(), opened->blob.end());
  return BootstrapResult{std::move(opened->table), opened->secret};
}

// The root's word on what this rank sent last: a refusal (its reason), or its close (Ok).
Status rootsWord(const RootLink& l, int rank, int nranks, Deadline deadline) {
  auto answer = readRootFrame(l, RootFrame::kRefused, rank, nranks, deadline);
  if (answer.ok()) return Status(Errc::kProtocol, l.where + ": an empty refusal");  // never: a refusal is an error
  return answer.status().code() == Errc::kPeerFailure ? Status::Ok() : answer.status();
}

// A block's leader: its block from its root, to root 0 with it, the table of every rank back to
// its root (which hands it to the rest of the block).
Result<BootstrapResult> leadBlock(std::span<const UniqueIdData> ids, int k, const RootLink& mine, int rank, int nranks,
                                  Deadline deadline) {
  const RankBlock b = rankBlock(nranks, static_cast<int>(ids.size()), k);
  RECCL_ASSIGN_OR_RETURN(std::vector<std::byte> body, readRootFrame(mine, RootFrame::kBlock, rank, nranks, deadline));
  const auto block = std::span<const std::byte>(body).first(body.size() - kTagBytes);
  if (!equalTags(std::span<const std::byte>(body).last(kTagBytes),
                 blockTag(ids[k].bootKey, mine.session.client, mine.session.server, block)))
    return Status(Errc::kPermission, mine.where + ": the root does not hold this job's secret");
  RECCL_TRY(decodeRankBlock(block, b.first, b.size()).status().Wrap(mine.where + ": its block"));

  Hello hello;
  hello.kind = HelloKind::kBootstrapBlock;
  hello.srcRank = rank;
  hello.nranks = nranks;
  hello.channel = static_cast<uint32_t>(ids.size());
  hello.epoch = 0;
  RECCL_ASSIGN_OR_RETURN(RootLink zero, helloRoot(ids[0], hello, [&](uint32_t) -> Result<std::vector<std::byte>> {
                           return std::vector<std::byte>(block.begin(), block.end());
                         }, deadline));
  std::vector<std::byte> blob;
  RECCL_ASSIGN_OR_RETURN(BootstrapResult out, readTable(zero, ids[0], rank, nranks, deadline, &blob));
  // The block may have failed while this rank was at root 0 (a member left): its root said so
  // and closed. Read that rather than send into a closed connection.
  if (pollfd p{mine.fd.get(), POLLIN, 0}; poll(&p, 1, 0) > 0) {
    RECCL_TRY(rootsWord(mine, rank, nranks, deadline));
    return Status(Errc::kPeerFailure, mine.where + ": closed before the table of every rank came back");
  }
  auto full = sealedTable(blob, out.comm, ids[k].bootKey, mine.session.client, mine.session.server, leaderTableTag);
  auto frame = rootFrame(RootFrame::kFull, full);
  sodium_memzero(full.data(), full.size());
  Status s = transport::sendAll(mine.fd.get(), frame, deadline);
  sodium_memzero(frame.data(), frame.size());
  // The root closes the connection once it handed the table to its block, or refuses it (the
  // block failed meanwhile, or what came back does not check out): this rank's communicator is
  // only as good as its block's.
  RECCL_TRY(rootsWord(mine, rank, nranks, deadline));
  RECCL_TRY(s.Wrap(mine.where + ": bringing back the table of every rank"));
  return out;
}

}  // namespace

Result<BootstrapResult> bootstrapExchange(std::span<const UniqueIdData> ids, int rank, int nranks,
                                          const std::function<Result<RankInfo>(uint32_t)>& makeInfo, Deadline deadline) {
  if (ids.empty() || static_cast<int>(ids.size()) > std::min(nranks, kMaxRoots))
    return Status(Errc::kInvalidArgument, "bootstrap: " + std::to_string(ids.size()) + " roots for " +
                                              std::to_string(nranks) + " ranks");
  const bool blocks = ids.size() > 1;
  const int nroots = static_cast<int>(ids.size());
  const int k = blocks ? blockOfRank(nranks, nroots, rank) : 0;
  Hello hello;
  hello.kind = blocks ? HelloKind::kBootstrapBlock : HelloKind::kBootstrap;
  hello.srcRank = rank;
  hello.nranks = nranks;
  if (blocks) {
    hello.channel = static_cast<uint32_t>(nroots);
    hello.epoch = static_cast<uint32_t>(k);
  }
  auto records = [&](uint32_t localAddr) -> Result<std::vector<std::byte>> {
    RECCL_ASSIGN_OR_RETURN(RankInfo info, makeInfo(localAddr));
    return blocks ? encodeRankTable({info}) : encodeRankInfo(info);
  };
  RECCL_ASSIGN_OR_RETURN(RootLink mine, helloRoot(ids[k], hello, records, deadline));
  const RankBlock b = rankBlock(nranks, nroots, k);
  const bool leads = k > 0 && rank == b.first;
  auto out = leads ? leadBlock(ids, k, mine, rank, nranks, deadline) : readTable(mine, ids[k], rank, nranks, deadline);
  if (out.ok() && blocks)
    RECCL_INFO(kLogBootstrap, "rank %d: bootstrap over %d roots, block %d (ranks %d-%d)%s", rank, nroots, k, b.first,
               b.end - 1, leads ? ", its leader" : "");
  return out;
}

}  // namespace reccl::core
