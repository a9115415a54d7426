// Connection set-up messages: the hello every connection starts with, its reply, the unique id,
// and the bootstrap records (each rank's host identity and NICs). Pure functions over byte spans,
// fuzzed in tests/unit/ccl/fuzz_*.cpp. Little-endian, fixed layouts, every length bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "reccl/common/status.h"

namespace reccl::core {

inline constexpr uint32_t kHelloMagic = 0x4c4c4852;  // "RHLL"
inline constexpr uint16_t kProtocolVersion = 2;
inline constexpr size_t kHelloBytes = 128;
inline constexpr size_t kHelloReplyBytes = 24;
inline constexpr size_t kShmNameMax = 63;
inline constexpr int kMaxRanks = 1 << 16;

enum class HelloKind : uint16_t { kBootstrap = 1, kTcpData = 2, kShmData = 3 };

struct Hello {
  HelloKind kind = HelloKind::kBootstrap;
  uint64_t secret = 0;
  uint64_t commId = 0;
  int32_t srcRank = 0;
  int32_t dstRank = 0;  // -1 for bootstrap
  int32_t nranks = 0;
  uint32_t channel = 0;
  uint32_t epoch = 1;
  std::string shmName;  // kShmData only
};

void encodeHello(const Hello& h, std::span<std::byte, kHelloBytes> out) noexcept;
// Syntax only: magic, version, kind, bounded fields, shm name charset.
Result<Hello> decodeHello(std::span<const std::byte> in);
// Semantics: the hello belongs to this job and communicator and names a valid peer.
Status acceptHello(const Hello& h, uint64_t secret, uint64_t commId, int nranks, int myRank);

enum class ReplyStatus : uint32_t { kOk = 0, kRefused = 1, kShmFailed = 2 };
struct HelloReply {
  ReplyStatus status = ReplyStatus::kOk;
  uint32_t epoch = 1;
  uint64_t applied = 0;  // receiver's applied step (resume point after a migration)
};
void encodeHelloReply(const HelloReply& r, std::span<std::byte, kHelloReplyBytes> out) noexcept;
Result<HelloReply> decodeHelloReply(std::span<const std::byte> in);

// recclUniqueId content.
struct UniqueIdData {
  uint32_t addr = 0;  // root IPv4, network order
  uint16_t port = 0;
  uint64_t secret = 0;
  uint64_t commId = 0;
};
inline constexpr size_t kUniqueIdBytes = 128;
void encodeUniqueId(const UniqueIdData& u, std::span<std::byte, kUniqueIdBytes> out) noexcept;
Result<UniqueIdData> decodeUniqueId(std::span<const std::byte> in);

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
  std::vector<NicInfo> nics;
};
inline constexpr size_t kMaxNics = 64;
inline constexpr size_t kMaxRankInfoBytes = 16384;

std::vector<std::byte> encodeRankInfo(const RankInfo& r);
Result<RankInfo> decodeRankInfo(std::span<const std::byte> in);

// The root's answer: every rank's RankInfo, in rank order.
std::vector<std::byte> encodeRankTable(const std::vector<RankInfo>& table);
Result<std::vector<RankInfo>> decodeRankTable(std::span<const std::byte> in, int nranks);

}  // namespace reccl::core
