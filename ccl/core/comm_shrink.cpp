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

uint32_t Comm::nextShrinkSerial(const std::array<std::byte, kShrinkDigestBytes>& digest) {
  std::lock_guard lk(shrinkMu_);
  return ++shrinkSerials_[digest];
}

Comm::ShrinkClaim::ShrinkClaim(Comm& comm, const std::array<std::byte, kShrinkDigestBytes>& digest, uint32_t serial)
    : comm_(comm) {
  std::lock_guard lk(comm_.shrinkMu_);
  it_ = comm_.shrinkClaims_.emplace(digest, serial);
}

Comm::ShrinkClaim::~ShrinkClaim() {
  std::lock_guard lk(comm_.shrinkMu_);
  comm_.shrinkClaims_.erase(it_);
}

void Comm::dropShrinkNotes() {
  std::lock_guard lk(shrinkMu_);
  for (auto& h : shrinkNotes_) wipeKey(h.note.id.bootKey);
  shrinkNotes_.clear();
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
  struct Wipe {
    std::array<std::byte, kShrinkNoteBytes>& b;
    ~Wipe() { sodium_memzero(b.data(), b.size()); }
  } wipe{body};
  const std::string to = "shrink note to rank " + std::to_string(peer);
  Status last(Errc::kTimeout, "no rail answered");
  // Dialled until a rail answers (a dead link's SYNs go unanswered, a listener not up yet refuses);
  // once connected, the answer is final: a refusal, or a hello or proof that fails, does not get
  // better by asking again.
  for (size_t i = 0;; i = (i + 1) % rails) {
    if (d.cancelled()) return Status(Errc::kAborted, to + ": the communicator is being closed");
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
    if (!session.ok()) return session.status().Wrap(to);
    RECCL_TRY(readProof(io, key_, *session).Wrap(to));
    std::array<std::byte, kHelloReplyBytes> rb;
    RECCL_TRY(transport::recvAll(fd->get(), rb, d).Wrap(to));
    auto reply = decodeHelloReply(rb);
    if (!reply.ok()) return reply.status().Wrap(to);
    if (reply->status != ReplyStatus::kOk)
      return Status(Errc::kPeerFailure, "rank " + std::to_string(peer) + " refused the shrink note (it holds one "
                                        "for this shrink already: two ranks lead it, their exclude lists differ)");
    return Status::Ok();
  }
  return last.Wrap(to + " (no answer before the deadline)");
}

Status Comm::acceptShrinkNote(UniqueFd fd, const Hello& h) {
  const Deadline d = Deadline::after(kHelloGrace);
  std::array<std::byte, kShrinkNoteBytes> body;
  RECCL_TRY(transport::recvAll(fd.get(), body, d).Wrap("shrink note from rank " + std::to_string(h.srcRank)));
  auto note = decodeShrinkNote(body);
  sodium_memzero(body.data(), body.size());  // it holds the new communicator's secret
  if (!note.ok()) return note.status();
  HelloReply reply;
  {
    std::lock_guard lk(shrinkMu_);
    const bool twice = std::any_of(shrinkNotes_.begin(), shrinkNotes_.end(), [&](const HeldShrinkNote& k) {
      return k.serial == h.epoch && k.note.excluded == note->excluded;
    });
    if (twice)
      reply.status = ReplyStatus::kRefused;
    else
      shrinkNotes_.push_back({h.srcRank, h.epoch, *note});
  }
  wipeKey(note->id.bootKey);
  shrinkCv_.notify_all();
  std::array<std::byte, kHelloReplyBytes> rb;
  encodeHelloReply(reply, rb);
  RECCL_TRY(transport::sendAll(fd.get(), rb, d));
  if (reply.status != ReplyStatus::kOk)
    return Status(Errc::kProtocol, "a second note for one shrink (from rank " + std::to_string(h.srcRank) + ")");
  return Status::Ok();
}

Result<ShrinkNote> Comm::takeShrinkNote(const std::array<std::byte, kShrinkDigestBytes>& digest, uint32_t serial,
                                        int leader, Deadline d) {
  std::unique_lock lk(shrinkMu_);
  for (;;) {
    // Notes of this list from shrinks before this one were meant for calls this rank gave up,
    // unless a claim holds them (a non-blocking shrink whose take is still to come).
    std::erase_if(shrinkNotes_, [&](HeldShrinkNote& k) {
      if (k.note.excluded != digest || k.serial >= serial || shrinkClaims_.count({digest, k.serial})) return false;
      wipeKey(k.note.id.bootKey);
      return true;
    });
    for (auto it = shrinkNotes_.begin(); it != shrinkNotes_.end(); ++it) {
      const bool mine = it->note.excluded == digest && it->serial == serial;
      const bool leadersOther = it->from == leader && it->serial == serial && it->note.excluded != digest;
      if (!mine && !leadersOther) continue;
      HeldShrinkNote k = *it;
      wipeKey(it->note.id.bootKey);
      shrinkNotes_.erase(it);
      if (leadersOther || k.from != leader) {
        wipeKey(k.note.id.bootKey);
        return Status(Errc::kInvalidUsage,
                      leadersOther ? "rank " + std::to_string(leader) + " leads this shrink with another exclude list: "
                                         "the ranks passed different exclude lists"
                                   : "rank " + std::to_string(k.from) + " led this shrink, where this rank's exclude list "
                                         "makes rank " + std::to_string(leader) +
                                         " the leader: the ranks passed different exclude lists");
      }
      ShrinkNote out = k.note;
      wipeKey(k.note.id.bootKey);
      return out;
    }
    if (d.cancelled()) return Status(Errc::kAborted, "the communicator is being closed");
    if (d.expired())
      return Status(Errc::kTimeout, "no word from rank " + std::to_string(leader) +
                                        " (the handover's leader: the lowest rank taking part) before the deadline");
    shrinkCv_.wait_for(lk, std::chrono::milliseconds(std::clamp(d.pollSliceMs(), 1, 100)));
  }
}

}  // namespace reccl::core
