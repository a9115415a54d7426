// The shared-memory pipe between a rank whose rail failed (the origin) and a same-host rank that
// forwards its traffic (the relay): two single-producer/single-consumer byte rings in one memfd
// mapping, "up" (origin -> relay) and "down" (relay -> origin), plus an eventfd per end to wake
// it. The pipe carries exactly the bytes the TCP connection would carry (hello, migration
// handshake, step frames, acks), so the far end sees an ordinary migrated connection.
//
// The origin creates the memfd and the eventfds and hands them to the relay over a unix socket
// (SCM_RIGHTS): no name in /dev/shm, nothing left behind when either process dies.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "reccl/common/deadline.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::failover {

inline constexpr uint32_t kRelayPipeMagic = 0x50594c52;  // "RLYP"

// Why the relay broke a pipe (RelayPipeShared::broken).
enum class RelayBreak : uint32_t {
  kNone = 0,
  kLink = 1,        // the relay's rail or TCP connection failed: migrate elsewhere
  kPeerClosed = 2,  // the far end closed the connection (it migrated it, or it is gone)
};

struct RelayRingCounters {
  alignas(64) std::atomic<uint64_t> head;  // bytes written, ever (producer)
  alignas(64) std::atomic<uint64_t> tail;  // bytes read, ever (consumer)
};

struct RelayPipeShared {
  uint32_t magic;
  uint32_t ringBytes;  // per direction, a power of two
  RelayRingCounters up;
  RelayRingCounters down;
  alignas(64) std::atomic<uint32_t> broken;  // RelayBreak, set by the relay
};
inline constexpr size_t kRelayPipeHeaderBytes = 4096;
static_assert(sizeof(RelayPipeShared) <= kRelayPipeHeaderBytes);

// One direction of the pipe as one end sees it.
class RelayRing {
 public:
  RelayRing() = default;
  RelayRing(RelayRingCounters* c, std::byte* data, uint32_t bytes) : c_(c), data_(data), bytes_(bytes) {}
  // Producer side. Contiguous free space at the head (may be shorter than free() at the wrap).
  size_t free() const noexcept;
  std::span<std::byte> writable() const noexcept;
  void produced(size_t n) noexcept;
  // Copies as much of `src` as fits; returns the bytes taken.
  size_t write(std::span<const std::byte> src) noexcept;
  // Consumer side. Garbage counters (a misbehaving peer) read as an empty ring.
  size_t used() const noexcept;
  std::span<const std::byte> readable() const noexcept;
  void consumed(size_t n) noexcept;
  // Copies min(used, dst.size()) bytes out; returns how many.
  size_t read(std::span<std::byte> dst) noexcept;
  // Copies dst.size() bytes without consuming them; false when fewer are there.
  bool peek(std::span<std::byte> dst) const noexcept;

 private:
  RelayRingCounters* c_ = nullptr;
  std::byte* data_ = nullptr;
  uint32_t bytes_ = 0;
};

// Owns the mapping and the three descriptors of one pipe (either end).
class RelayPipe {
 public:
  RelayPipe() = default;
  RelayPipe(RelayPipe&& o) noexcept;
  RelayPipe& operator=(RelayPipe&& o) noexcept;
  ~RelayPipe();

  // Origin side: a fresh memfd with two rings of `ringBytes` (rounded up to a power of two).
  static Result<RelayPipe> create(size_t ringBytes);
  // Relay side: maps what the origin sent; checks the header and the size.
  static Result<RelayPipe> attach(UniqueFd mem, UniqueFd originWake, UniqueFd relayWake);

  RelayPipeShared* shared() const noexcept { return shared_; }
  RelayRing up() const noexcept;    // origin writes, relay reads
  RelayRing down() const noexcept;  // relay writes, origin reads
  int memFd() const noexcept { return mem_.get(); }
  int originWakeFd() const noexcept { return originWake_.get(); }
  int relayWakeFd() const noexcept { return relayWake_.get(); }
  // Wake the other end (eventfd write; cheap, never blocks).
  void wakeOrigin() const noexcept;
  void wakeRelay() const noexcept;
  // Clears a wake-up counter before re-checking the rings (no lost wake-ups: a wake after this
  // leaves the eventfd readable for the next poll).
  static void drainWake(int fd) noexcept;
  // Drops this end's mapping but keeps the descriptors (a retired path's wake-ups stay harmless);
  // only the thread that used the rings may call it.
  void unmap() noexcept { reset(); }

  // Origin side, before the paths start: the handshake through the pipe, with a deadline.
  // `ctrlFd` (the unix socket to the relay) ends the wait when the relay goes away; a read first
  // takes the bytes the relay wrote before it went away.
  Status writeAll(std::span<const std::byte> src, int ctrlFd, Deadline d);
  Status readAll(std::span<std::byte> dst, int ctrlFd, Deadline d);

 private:
  Status waitOrigin(int ctrlFd, Deadline d);
  void reset() noexcept;

  UniqueFd mem_;
  UniqueFd originWake_;
  UniqueFd relayWake_;
  RelayPipeShared* shared_ = nullptr;
  size_t mapBytes_ = 0;
};

}  // namespace reccl::failover
