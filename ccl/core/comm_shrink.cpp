// recclCommShrink's delivery (core/comm.h): the leader dials each surviving rank's data listener
// and hands it the new communicator's rendezvous; the listener keeps it for the survivor's
// shrink call. Nothing here uses the communicator's connections: after a rank's death they may
// all be failed, while every live rank's listener still answers.
#include <sodium.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <thread>

#include "core/comm.h"
#include "core/handshake.h"
#include "reccl/common/log.h"

namespace reccl::core {

namespace {
// Each rail is dialled this long before the next one is tried.
constexpr int64_t kShrinkDialSliceMs = 1000;
}  // namespace

std::array<std::byte, kShrinkDigestBytes> Comm::shrinkDigest(const std::vector<int>& excluded) {
  std::vector<unsigned char> bytes;
  for (int r : excluded)
    for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<unsigned char>(static_cast<uint32_t>(r) >> (8 * b)));
  std::array<std::byte, kShrinkDigestBytes> out;
  crypto_generichash(reinterpret_cast<unsigned char*>(out.data()), out.size(), bytes.data(), bytes.size(), nullptr, 0);
  return out;
}

Status Comm::sendShrinkNote(int peer, uint32_t serial, const ShrinkNote& note, Deadline d) {
  if (peer < 0 || peer >= nranks_ || peer == rank_) return Status(Errc::kInternal, "shrink note to a bad rank");
  const RankInfo& pi = table_[static_cast<size_t>(peer)];
  const size_t rails = std::min(myNics_.size(), pi.nics.size());
  if (rails == 0) return Status(Errc::kInternal, "no nic to rank " + std::to_string(peer));
  Hello h;
  h.kind = HelloKind::kShrink;
  h.commId = commId_;
  h.srcRank = rank_;
  h.dstRank = peer;
  h.nranks = nranks_;
  h.epoch = serial;
  std::array<std::byte, kShrinkNoteBytes> body;
  encodeShrinkNote(note, body);
  Status last(Errc::kTimeout, "no rail answered");
  for (size_t i = 0;; i = (i + 1) % rails) {
    if (d.expired()) break;
    const NicInfo& src = myNics_[i];
    transport::Endpoint dst{pi.nics[i].addr, pi.dataPort};
    auto fd = transport::connectTcp(dst, src.addr, src.name == "lo" ? "" : src.name, d.within(kShrinkDialSliceMs));
    if (!fd.ok()) {
      last = fd.status();
      // A refused connection returns at once: after a round of them, wait before the next.
      if (i + 1 == rails) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    ByteIo io = socketIo(fd->get(), d);
    auto session = sendAuthHello(io, h, key_, AuthPurpose::kData, body);
    Status s = session.status();
    if (s.ok()) s = readProof(io, key_, *session);
    std::array<std::byte, kHelloReplyBytes> rb;
    if (s.ok()) s = transport::recvAll(fd->get(), rb, d);
    if (s.ok()) {
      auto reply = decodeHelloReply(rb);
      if (!reply.ok()) return reply.status().Wrap("shrink note to rank " + std::to_string(peer));
      if (reply->status != ReplyStatus::kOk)
        return Status(Errc::kPeerFailure, "rank " + std::to_string(peer) + " refused the shrink note");
      return Status::Ok();
    }
    last = s;  // the peer's end went away mid-handshake: try again, on the next rail
  }
  return last.Wrap("shrink note to rank " + std::to_string(peer) + " (no answer before the deadline)");
}

Status Comm::acceptShrinkNote(UniqueFd fd, const Hello& h) {
  const Deadline d = Deadline::after(kHelloGrace);
  std::array<std::byte, kShrinkNoteBytes> body;
  RECCL_TRY(transport::recvAll(fd.get(), body, d).Wrap("shrink note from rank " + std::to_string(h.srcRank)));
  RECCL_ASSIGN_OR_RETURN(ShrinkNote note, decodeShrinkNote(body));
  std::fill(body.begin(), body.end(), std::byte{0});  // it holds the new communicator's secret
  {
    std::lock_guard lk(shrinkMu_);
    if (shrinkNotes_.count(h.epoch))
      return Status(Errc::kProtocol, "a second note for shrink " + std::to_string(h.epoch) + " (from rank " +
                                         std::to_string(h.srcRank) + ")");
    shrinkNotes_.emplace(h.epoch, std::make_pair(h.srcRank, note));
  }
  shrinkCv_.notify_all();
  std::array<std::byte, kHelloReplyBytes> rb;
  encodeHelloReply(HelloReply{}, rb);
  return transport::sendAll(fd.get(), rb, d);
}

Result<ShrinkNote> Comm::takeShrinkNote(uint32_t serial, int leader, Deadline d) {
  std::unique_lock lk(shrinkMu_);
  for (;;) {
    if (auto it = shrinkNotes_.find(serial); it != shrinkNotes_.end()) {
      const auto [from, note] = it->second;
      shrinkNotes_.erase(it);
      if (from != leader)
        return Status(Errc::kInvalidUsage, "rank " + std::to_string(from) + " led this shrink, where this rank's "
                                               "exclude list makes rank " + std::to_string(leader) +
                                               " the leader: the ranks passed different exclude lists");
      return note;
    }
    if (d.expired())
      return Status(Errc::kTimeout, "no word from rank " + std::to_string(leader) +
                                        " (the shrink's leader: the lowest rank not excluded) before the deadline");
    shrinkCv_.wait_for(lk, std::chrono::milliseconds(std::clamp<int64_t>(d.remainingMsForPoll(), 1, 100)));
  }
}

}  // namespace reccl::core
