#include "core/wire.h"

#include <cstring>

#include "channel/wire_bytes.h"

namespace reccl::core {
namespace {

using channel::get;
using channel::put;

Status bad(const std::string& what) { return Status(Errc::kProtocol, what); }

// Appends/reads length-prefixed fields with bounds checks.
class Writer {
 public:
  template <typename T>
  void num(T v) {
    size_t o = buf.size();
    buf.resize(o + sizeof(T));
    std::memcpy(buf.data() + o, &v, sizeof(T));
  }
  void str(const std::string& s) {
    num<uint16_t>(static_cast<uint16_t>(s.size()));
    auto* p = reinterpret_cast<const std::byte*>(s.data());
    buf.insert(buf.end(), p, p + s.size());
  }
  void bytes(std::span<const std::byte> b) { buf.insert(buf.end(), b.begin(), b.end()); }
  std::vector<std::byte> buf;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  template <typename T>
  bool num(T* v) {
    if (in_.size() - off_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + off_, sizeof(T));
    off_ += sizeof(T);
    return true;
  }
  bool str(std::string* s, size_t max) {
    uint16_t n;
    if (!num(&n) || n > max || in_.size() - off_ < n) return false;
    s->assign(reinterpret_cast<const char*>(in_.data() + off_), n);
    off_ += n;
    return true;
  }
  bool take(size_t n, std::span<const std::byte>* out) {
    if (in_.size() - off_ < n) return false;
    *out = in_.subspan(off_, n);
    off_ += n;
    return true;
  }
  bool done() const { return off_ == in_.size(); }

 private:
  std::span<const std::byte> in_;
  size_t off_ = 0;
};

bool printable(const std::string& s) {
  for (char c : s)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

constexpr uint32_t kRankInfoMagic = 0x464e4952;   // "RINF"
constexpr uint32_t kRankTableMagic = 0x4c425452;  // "RTBL"
constexpr uint32_t kUniqueIdMagic = 0x44495552;   // "RUID"
constexpr uint32_t kReplyMagic = 0x504c5252;      // "RRLP"
constexpr uint32_t kRootFrameMagic = 0x46544252;  // "RBTF"

}  // namespace

// Hello layout: 0 magic | 4 version u16 | 6 kind u16 | 8 job id u64 | 16 commId u64 |
// 24 src i32 | 28 dst i32 | 32 nranks i32 | 36 channel u32 | 40 epoch u32 | 44 name len u8 |
// 45..108 name | 108..124 nonce | rest zero.
void encodeHello(const Hello& h, std::span<std::byte, kHelloBytes> out) noexcept {
  std::byte* p = out.data();
  std::memset(p, 0, kHelloBytes);
  put<uint32_t>(p, 0, kHelloMagic);
  put<uint16_t>(p, 4, kProtocolVersion);
  put<uint16_t>(p, 6, static_cast<uint16_t>(h.kind));
  put<uint64_t>(p, 8, h.jobId);
  put<uint64_t>(p, 16, h.commId);
  put<int32_t>(p, 24, h.srcRank);
  put<int32_t>(p, 28, h.dstRank);
  put<int32_t>(p, 32, h.nranks);
  put<uint32_t>(p, 36, h.channel);
  put<uint32_t>(p, 40, h.epoch);
  size_t n = std::min(h.shmName.size(), kShmNameMax);
  put<uint8_t>(p, 44, static_cast<uint8_t>(n));
  std::memcpy(p + 45, h.shmName.data(), n);
  std::memcpy(p + 108, h.nonce.data(), h.nonce.size());
}

Result<Hello> decodeHello(std::span<const std::byte> in) {
  if (in.size() < kHelloBytes) return bad("hello: short message");
  const std::byte* p = in.data();
  if (get<uint32_t>(p, 0) != kHelloMagic) return bad("hello: bad magic (not a reccl peer)");
  if (get<uint16_t>(p, 4) != kProtocolVersion)
    return bad("hello: protocol version " + std::to_string(get<uint16_t>(p, 4)) + " unsupported");
  Hello h;
  uint16_t kind = get<uint16_t>(p, 6);
  if (kind < 1 || kind > 5) return bad("hello: unknown kind " + std::to_string(kind));
  h.kind = static_cast<HelloKind>(kind);
  h.jobId = get<uint64_t>(p, 8);
  h.commId = get<uint64_t>(p, 16);
  h.srcRank = get<int32_t>(p, 24);
  h.dstRank = get<int32_t>(p, 28);
  h.nranks = get<int32_t>(p, 32);
  h.channel = get<uint32_t>(p, 36);
  h.epoch = get<uint32_t>(p, 40);
  if (h.nranks < 1 || h.nranks > kMaxRanks) return bad("hello: bad nranks " + std::to_string(h.nranks));
  if (h.srcRank < 0 || h.srcRank >= h.nranks) return bad("hello: bad source rank " + std::to_string(h.srcRank));
  if (h.dstRank < -1 || h.dstRank >= h.nranks) return bad("hello: bad destination rank " + std::to_string(h.dstRank));
  if (h.channel > 1024) return bad("hello: bad channel " + std::to_string(h.channel));
  size_t n = get<uint8_t>(p, 44);
  if (n > kShmNameMax) return bad("hello: shm name too long");
  h.shmName.assign(reinterpret_cast<const char*>(p + 45), n);
  if (h.kind == HelloKind::kShmData) {
    if (n < 2 || h.shmName[0] != '/' || !printable(h.shmName) || h.shmName.find('/', 1) != std::string::npos)
      return bad("hello: bad shm name");
  } else if (n != 0) {
    return bad("hello: unexpected shm name");
  }
  std::memcpy(h.nonce.data(), p + 108, h.nonce.size());
  return h;
}

Status acceptHello(const Hello& h, uint64_t commId, int nranks, int myRank) {
  if (h.commId != commId) return Status(Errc::kPermission, "hello: foreign communicator");
  if (h.nranks != nranks)
    return Status(Errc::kProtocol, "hello: nranks " + std::to_string(h.nranks) + " != " + std::to_string(nranks));
  if (isBootstrapHello(h.kind)) {
    if (h.dstRank != -1) return Status(Errc::kProtocol, "hello: bootstrap hello names a destination");
  } else if (h.dstRank != myRank) {
    return Status(Errc::kProtocol, "hello: meant for rank " + std::to_string(h.dstRank));
  }
  if (!isBootstrapHello(h.kind) && h.srcRank == myRank)
    return Status(Errc::kProtocol, "hello: from myself");
  return Status::Ok();
}

Session sealHello(Hello hello, const Key& key, const Nonce& serverNonce, std::span<std::byte, kAuthHelloBytes> out) {
  Session s;
  s.server = serverNonce;
  s.client = randomNonce();
  hello.nonce = s.client;
  auto hb = out.first<kHelloBytes>();
  encodeHello(hello, hb);
  Tag t = helloTag(key, serverNonce, hb);
  std::memcpy(out.data() + kHelloBytes, t.data(), t.size());
  return s;
}

Result<Hello> openAuthHello(std::span<const std::byte> bytes, const Key& key, const Nonce& serverNonce) {
  if (bytes.size() != kAuthHelloBytes) return bad("hello: wrong size");
  auto hello = bytes.first(kHelloBytes);
  RECCL_ASSIGN_OR_RETURN(Hello h, decodeHello(hello));
  if (!verifyHelloTag(key, serverNonce, hello, bytes.subspan(kHelloBytes)))
    return Status(Errc::kPermission, "hello: authentication failed (not this communicator's key)");
  return h;
}

void encodeHelloReply(const HelloReply& r, std::span<std::byte, kHelloReplyBytes> out) noexcept {
  std::byte* p = out.data();
  std::memset(p, 0, kHelloReplyBytes);
  put<uint32_t>(p, 0, kReplyMagic);
  put<uint32_t>(p, 4, static_cast<uint32_t>(r.status));
  put<uint32_t>(p, 8, r.epoch);
  put<uint64_t>(p, 16, r.applied);
}

Result<HelloReply> decodeHelloReply(std::span<const std::byte> in) {
  if (in.size() < kHelloReplyBytes) return bad("hello reply: short message");
  const std::byte* p = in.data();
  if (get<uint32_t>(p, 0) != kReplyMagic) return bad("hello reply: bad magic");
  uint32_t st = get<uint32_t>(p, 4);
  if (st > 2) return bad("hello reply: unknown status");
  HelloReply r;
  r.status = static_cast<ReplyStatus>(st);
  r.epoch = get<uint32_t>(p, 8);
  r.applied = get<uint64_t>(p, 16);
  return r;
}

void encodeRootFrameHeader(const RootFrameHeader& h, std::span<std::byte, kRootFrameHeaderBytes> out) noexcept {
  std::byte* p = out.data();
  put<uint32_t>(p, 0, kRootFrameMagic);
  put<uint16_t>(p, 4, static_cast<uint16_t>(h.type));
  put<uint16_t>(p, 6, 0);
  put<uint32_t>(p, 8, h.length);
}

Result<RootFrameHeader> decodeRootFrameHeader(std::span<const std::byte> in, size_t maxTable) {
  if (in.size() != kRootFrameHeaderBytes) return bad("bootstrap frame: wrong size");
  const std::byte* p = in.data();
  if (get<uint32_t>(p, 0) != kRootFrameMagic) return bad("bootstrap frame: bad magic");
  RootFrameHeader h;
  uint16_t type = get<uint16_t>(p, 4);
  h.length = get<uint32_t>(p, 8);
  if (type == static_cast<uint16_t>(RootFrame::kRefused)) {
    if (h.length > kMaxRefusalBytes) return bad("bootstrap frame: refusal too long");
  } else if (type == static_cast<uint16_t>(RootFrame::kTable) || type == static_cast<uint16_t>(RootFrame::kFull)) {
    if (h.length < 4 + kSealedCommSecretBytes + kTagBytes || h.length > maxTable)
      return bad("bootstrap frame: bad table length " + std::to_string(h.length));
  } else if (type == static_cast<uint16_t>(RootFrame::kBlock)) {
    if (h.length < 8 + kTagBytes || h.length > maxTable)
      return bad("bootstrap frame: bad block length " + std::to_string(h.length));
  } else {
    return bad("bootstrap frame: unknown type " + std::to_string(type));
  }
  h.type = static_cast<RootFrame>(type);
  return h;
}

void encodeUniqueId(const UniqueIdData& u, std::span<std::byte, kUniqueIdBytes> out) noexcept {
  std::byte* p = out.data();
  std::memset(p, 0, kUniqueIdBytes);
  put<uint32_t>(p, 0, kUniqueIdMagic);
  put<uint16_t>(p, 4, kProtocolVersion);
  put<uint32_t>(p, 8, u.addr);
  put<uint16_t>(p, 12, u.port);
  put<uint64_t>(p, 16, u.jobId);
  std::memcpy(p + 24, u.bootKey.data(), u.bootKey.size());
}

Result<UniqueIdData> decodeUniqueId(std::span<const std::byte> in) {
  if (in.size() < 24 + kKeyBytes) return Status(Errc::kInvalidArgument, "commId: too short");
  const std::byte* p = in.data();
  if (get<uint32_t>(p, 0) != kUniqueIdMagic || get<uint16_t>(p, 4) != kProtocolVersion)
    return Status(Errc::kInvalidArgument, "commId: not made by recclGetUniqueId");
  UniqueIdData u;
  u.addr = get<uint32_t>(p, 8);
  u.port = get<uint16_t>(p, 12);
  u.jobId = get<uint64_t>(p, 16);
  std::memcpy(u.bootKey.data(), p + 24, u.bootKey.size());
  if (u.port == 0) return Status(Errc::kInvalidArgument, "commId: no root port");
  return u;
}

void encodeShrinkNote(const ShrinkNote& n, std::span<std::byte, kShrinkNoteBytes> out) noexcept {
  std::byte* p = out.data();
  put<int32_t>(p, 0, n.nranks);
  std::memcpy(p + 4, n.excluded.data(), kShrinkDigestBytes);
  encodeUniqueId(n.id, out.subspan<4 + kShrinkDigestBytes, kUniqueIdBytes>());
}

Result<ShrinkNote> decodeShrinkNote(std::span<const std::byte> in) {
  if (in.size() < kShrinkNoteBytes) return bad("shrink note: short message");
  const std::byte* p = in.data();
  ShrinkNote n;
  n.nranks = get<int32_t>(p, 0);
  if (n.nranks < 1 || n.nranks > kMaxRanks) return bad("shrink note: bad nranks " + std::to_string(n.nranks));
  std::memcpy(n.excluded.data(), p + 4, kShrinkDigestBytes);
  auto id = decodeUniqueId(in.subspan(4 + kShrinkDigestBytes, kUniqueIdBytes));
  if (!id.ok()) return bad("shrink note: " + id.status().message());
  n.id = *id;
  return n;
}

std::vector<std::byte> encodeRankInfo(const RankInfo& r) {
  Writer w;
  w.num<uint32_t>(kRankInfoMagic);
  w.num<uint16_t>(kProtocolVersion);
  w.num<int32_t>(r.rank);
  w.str(r.hostId);
  w.str(r.hostName);
  w.num<uint32_t>(r.pid);
  w.num<uint16_t>(r.dataPort);
  w.num<uint32_t>(r.chunkBytes);
  w.num<uint32_t>(r.slots);
  w.num<int32_t>(r.nchannels);
  w.num<uint32_t>(r.flags);
  w.num<uint16_t>(r.cpus);
  w.num<uint16_t>(r.onlineCpus);
  w.num<int32_t>(r.channelThreads);
  w.num<uint8_t>(r.transport);
  w.num<uint8_t>(r.rdmaReady ? 1 : 0);
  w.str(r.rdmaWhy);
  w.num<int16_t>(r.homeRail);
  w.num<uint16_t>(static_cast<uint16_t>(r.nics.size()));
  for (const auto& n : r.nics) {
    w.str(n.name);
    w.num<uint32_t>(n.addr);
  }
  return std::move(w.buf);
}

Result<RankInfo> decodeRankInfo(std::span<const std::byte> in) {
  if (in.size() > kMaxRankInfoBytes) return bad("rank info: too large");
  Reader rd(in);
  uint32_t magic;
  uint16_t version, nnics;
  uint8_t rdmaReady = 0;
  RankInfo r;
  if (!rd.num(&magic) || magic != kRankInfoMagic) return bad("rank info: bad magic");
  if (!rd.num(&version) || version != kProtocolVersion) return bad("rank info: bad version");
  if (!rd.num(&r.rank) || !rd.str(&r.hostId, 512) || !rd.str(&r.hostName, 256) || !rd.num(&r.pid) ||
      !rd.num(&r.dataPort) || !rd.num(&r.chunkBytes) || !rd.num(&r.slots) || !rd.num(&r.nchannels) ||
      !rd.num(&r.flags) || !rd.num(&r.cpus) || !rd.num(&r.onlineCpus) || !rd.num(&r.channelThreads) ||
      !rd.num(&r.transport) || !rd.num(&rdmaReady) || !rd.str(&r.rdmaWhy, 512) || !rd.num(&r.homeRail) ||
      !rd.num(&nnics))
    return bad("rank info: truncated");
  if (r.rank < 0 || r.rank >= kMaxRanks) return bad("rank info: bad rank");
  if (!printable(r.hostId) || !printable(r.hostName)) return bad("rank info: bad host identity");
  if (nnics > kMaxNics) return bad("rank info: too many NICs");
  if (r.chunkBytes == 0 || r.slots == 0 || r.slots > 1024) return bad("rank info: bad slot geometry");
  if (r.nchannels < 0 || r.nchannels > 64) return bad("rank info: bad channel count");
  if (r.channelThreads < 0 || r.channelThreads > 64) return bad("rank info: bad channel thread count");
  if (r.transport > 2 || rdmaReady > 1) return bad("rank info: bad transport report");
  if (!printable(r.rdmaWhy)) return bad("rank info: bad transport reason");
  r.rdmaReady = rdmaReady != 0;
  for (uint16_t i = 0; i < nnics; ++i) {
    NicInfo n;
    if (!rd.str(&n.name, 15) || !rd.num(&n.addr)) return bad("rank info: truncated NIC list");
    if (n.name.empty() || !printable(n.name)) return bad("rank info: bad NIC name");
    r.nics.push_back(std::move(n));
  }
  if (r.homeRail < -1 || r.homeRail >= static_cast<int>(r.nics.size())) return bad("rank info: bad home rail");
  if (!rd.done()) return bad("rank info: trailing bytes");
  return r;
}

std::vector<std::byte> encodeRankTable(const std::vector<RankInfo>& table) {
  Writer w;
  w.num<uint32_t>(kRankTableMagic);
  w.num<uint32_t>(static_cast<uint32_t>(table.size()));
  for (const auto& r : table) {
    auto b = encodeRankInfo(r);
    w.num<uint32_t>(static_cast<uint32_t>(b.size()));
    w.bytes(b);
  }
  return std::move(w.buf);
}

Result<std::vector<RankInfo>> decodeRankTable(std::span<const std::byte> in, int nranks) {
  return decodeRankBlock(in, 0, nranks);
}

Result<std::vector<RankInfo>> decodeRankBlock(std::span<const std::byte> in, int first, int count) {
  Reader rd(in);
  uint32_t magic, n;
  if (!rd.num(&magic) || magic != kRankTableMagic) return bad("rank table: bad magic");
  if (!rd.num(&n) || static_cast<int64_t>(n) != count) return bad("rank table: wrong rank count");
  std::vector<RankInfo> out;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t len;
    std::span<const std::byte> blob;
    if (!rd.num(&len) || len > kMaxRankInfoBytes || !rd.take(len, &blob)) return bad("rank table: truncated");
    RECCL_ASSIGN_OR_RETURN(RankInfo r, decodeRankInfo(blob));
    if (static_cast<int64_t>(r.rank) != static_cast<int64_t>(first) + i) return bad("rank table: out of order");
    out.push_back(std::move(r));
  }
  if (!rd.done()) return bad("rank table: trailing bytes");
  return out;
}

RankBlock rankBlock(int nranks, int nroots, int index) {
  auto at = [&](int k) { return static_cast<int>(static_cast<int64_t>(k) * nranks / nroots); };
  return {at(index), at(index + 1)};
}

int blockOfRank(int nranks, int nroots, int rank) {
  // The largest k with floor(k * nranks / nroots) <= rank, i.e. k * nranks < (rank + 1) * nroots.
  return static_cast<int>((static_cast<int64_t>(rank + 1) * nroots - 1) / nranks);
}

}  // namespace reccl::core
