// Connection set-up messages: the hello every connection starts with, its reply, the unique id,
// and the bootstrap records (each rank's host identity and NICs). Pure functions over byte spans,
// fuzzed in tests/unit/ccl/fuzz_*.cpp. Little-endian, fixed layouts, every length bounded.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/auth.h"
#include "reccl/common/status.h"

namespace reccl::core {

inline constexpr uint32_t kHelloMagic = 0x4c4c4852;  // "RHLL"
// 3: every connection authenticated by challenge and MAC (core/auth.h); the hello carries the
// public job id where it carried a launcher-derived secret. 5: RankInfo::homeRail.
inline constexpr uint16_t kProtocolVersion = 5;
inline constexpr size_t kHelloBytes = 128;
inline constexpr size_t kAuthHelloBytes = kHelloBytes + kTagBytes;  // hello + its MAC
inline constexpr size_t kHelloReplyBytes = 24;
inline constexpr size_t kShmNameMax = 63;
inline constexpr int kMaxRanks = 1 << 16;

// kShrink: recclCommShrink's leader handing a surviving rank the new communicator's rendezvous
// (a ShrinkNote right behind the hello; the hello's epoch is the parent's shrink serial).
// kBootstrapBlock: recclCommInitRankScalable's bootstrap hello (core/bootstrap.h): the hello's
// channel is the number of roots, its epoch the index of the root it goes to.
enum class HelloKind : uint16_t { kBootstrap = 1, kTcpData = 2, kShmData = 3, kShrink = 4, kBootstrapBlock = 5 };
inline constexpr int kMaxRoots = 1024;
inline constexpr bool isBootstrapHello(HelloKind k) { return k == HelloKind::kBootstrap || k == HelloKind::kBootstrapBlock; }

struct Hello {
  HelloKind kind = HelloKind::kBootstrap;
  uint64_t jobId = 0;   // public: tells jobs apart, proves nothing (the MAC does)
  uint64_t commId = 0;  // 0 in a bootstrap hello (the root draws it)
  int32_t srcRank = 0;
  int32_t dstRank = 0;  // -1 for bootstrap
  int32_t nranks = 0;
  uint32_t channel = 0;
  uint32_t epoch = 1;
  std::string shmName;  // kShmData only
  Nonce nonce{};        // the connecting side's nonce: the acceptor's proof covers it
};

void encodeHello(const Hello& h, std::span<std::byte, kHelloBytes> out) noexcept;
// Syntax only: magic, version, kind, bounded fields, shm name charset.
Result<Hello> decodeHello(std::span<const std::byte> in);
// Semantics: the hello belongs to this communicator and names a valid peer (its MAC is checked
// apart, by the connection's acceptor: core/handshake.h).
Status acceptHello(const Hello& h, uint64_t commId, int nranks, int myRank);

// The authenticated hello (core/auth.h): the hello and its MAC over the acceptor's challenge.
// The connecting side's two nonces, for the acceptor's proof.
struct Session {
  Nonce client{};
  Nonce server{};
};
// Encodes the hello (its nonce drawn here) and its MAC over the acceptor's nonce into `out`.
Session sealHello(Hello hello, const Key& key, const Nonce& serverNonce, std::span<std::byte, kAuthHelloBytes> out);
// Decodes an authenticated hello and checks its MAC (syntax, then the key).
Result<Hello> openAuthHello(std::span<const std::byte> bytes, const Key& key, const Nonce& serverNonce);

enum class ReplyStatus : uint32_t { kOk = 0, kRefused = 1, kShmFailed = 2 };
struct HelloReply {
  ReplyStatus status = ReplyStatus::kOk;
  uint32_t epoch = 1;
  uint64_t applied = 0;  // receiver's applied step (resume point after a migration)
};
void encodeHelloReply(const HelloReply& r, std::span<std::byte, kHelloReplyBytes> out) noexcept;
Result<HelloReply> decodeHelloReply(std::span<const std::byte> in);

// Root → rank messages after the challenge: 0 magic "RBTF" u32 | 4 type u16 | 6 zero u16 |
// 8 length u32 | payload. A refusal's payload is its reason (text); a table's is
// [u32 table length][rank table][sealed communicator secret][table tag]. With several roots
// (core/bootstrap.h): a block's (root → the block's leader) is [rank block][block tag]; the
// leader's full table (leader → its block's root) is a table's layout under the leader's tag.
enum class RootFrame : uint16_t { kTable = 1, kRefused = 2, kBlock = 3, kFull = 4 };
inline constexpr size_t kRootFrameHeaderBytes = 12;
inline constexpr size_t kMaxRefusalBytes = 512;
struct RootFrameHeader {
  RootFrame type = RootFrame::kTable;
  uint32_t length = 0;
};
void encodeRootFrameHeader(const RootFrameHeader& h, std::span<std::byte, kRootFrameHeaderBytes> out) noexcept;
// maxTable bounds a table's length (the ranks' record limit times the rank count).
Result<RootFrameHeader> decodeRootFrameHeader(std::span<const std::byte> in, size_t maxTable);

// recclUniqueId content (or what the launcher environment gives): where the root listens, the
// job's public id and the bootstrap key (a secret: whoever holds the unique id may join).
struct UniqueIdData {
  uint32_t addr = 0;  // root IPv4, network order
  uint16_t port = 0;
  uint64_t jobId = 0;
  Key bootKey{};      // all zero: no job secret (the bootstrap is open to whoever reaches it)
};
inline constexpr size_t kUniqueIdBytes = 128;
void encodeUniqueId(const UniqueIdData& u, std::span<std::byte, kUniqueIdBytes> out) noexcept;
// One rendezvous's unique ids (one per bootstrap root: recclCommInitRankScalable), every copy's
// keys wiped when it goes. Filled whole or after a reserve: a reallocation would leave a key behind.
struct RendezvousIds {
  std::vector<UniqueIdData> ids;
  RendezvousIds() = default;
  explicit RendezvousIds(std::span<const UniqueIdData> from) : ids(from.begin(), from.end()) {}
  RendezvousIds(const RendezvousIds&) = default;
  RendezvousIds& operator=(const RendezvousIds&) = default;
  ~RendezvousIds() {
    for (auto& id : ids) wipeKey(id.bootKey);
  }
};
Result<UniqueIdData> decodeUniqueId(std::span<const std::byte> in);

// recclCommShrink's note: 0 nranks i32 | 4 digest of the excluded ranks (kShrinkDigestBytes) |
// 20 the new communicator's unique id (kUniqueIdBytes).
inline constexpr size_t kShrinkDigestBytes = 16;
inline constexpr size_t kShrinkNoteBytes = 4 + kShrinkDigestBytes + kUniqueIdBytes;
struct ShrinkNote {
  int32_t nranks = 0;
  std::array<std::byte, kShrinkDigestBytes> excluded{};
  UniqueIdData id;
};
void encodeShrinkNote(const ShrinkNote& n, std::span<std::byte, kShrinkNoteBytes> out) noexcept;
Result<ShrinkNote> decodeShrinkNote(std::span<const std::byte> in);

struct NicInfo {
  std::string name;
  uint32_t addr = 0;  // IPv4, network order
};

// What every rank tells every other rank at start-up.
struct RankInfo {
  int32_t rank = 0;
  std::string hostId;    // boot id + host name + network namespace: equal means "same host"; the
                         // boot id before the first '/' is the machine (shared CPUs)
  std::string hostName;
  uint32_t pid = 0;
  uint16_t dataPort = 0;
  uint32_t chunkBytes = 0;
  uint32_t slots = 0;
  int32_t nchannels = 0;  // RECCL_NCHANNELS of this rank (0: one per NIC)
  uint32_t flags = 0;     // bit 0: shared memory disabled
  // What the channel threads are agreed from (core::computeTopology): the CPUs this rank may use
  // (its affinity set, capped by its cgroup's CPU quota), the CPUs online on its machine (0:
  // unknown), and its RECCL_CHANNEL_THREADS (0: auto).
  uint16_t cpus = 0;
  uint16_t onlineCpus = 0;
  int32_t channelThreads = 0;
  // RECCL_TRANSPORT as this rank reads it (0 auto, 1 verbs, 2 socket; rank 0's wins) and whether
  // every one of its rails has an ACTIVE RDMA port (core/comm_transport.h); rdmaWhy says why not.
  uint8_t transport = 0;
  bool rdmaReady = false;
  std::string rdmaWhy;
  // The rail (an index into nics) this rank's channels start on when it sends
  // (CommOptions::homeNic; core::railFor); -1: the one its local rank gives.
  int16_t homeRail = -1;
  std::vector<NicInfo> nics;
};
inline constexpr size_t kMaxNics = 64;
inline constexpr size_t kMaxRankInfoBytes = 16384;

std::vector<std::byte> encodeRankInfo(const RankInfo& r);
Result<RankInfo> decodeRankInfo(std::span<const std::byte> in);

// The root's answer: every rank's RankInfo, in rank order.
std::vector<std::byte> encodeRankTable(const std::vector<RankInfo>& table);
Result<std::vector<RankInfo>> decodeRankTable(std::span<const std::byte> in, int nranks);
// A block of consecutive ranks' RankInfo in the table's layout: `count` ranks from rank `first`.
Result<std::vector<RankInfo>> decodeRankBlock(std::span<const std::byte> in, int first, int count);

// recclCommInitRankScalable's blocks: root `index` of `nroots` serves ranks [first, end) of
// `nranks`, consecutive and as even as can be; the first of a block leads it.
struct RankBlock {
  int first = 0;
  int end = 0;
  int size() const { return end - first; }
};
RankBlock rankBlock(int nranks, int nroots, int index);
int blockOfRank(int nranks, int nroots, int rank);

}  // namespace reccl::core
