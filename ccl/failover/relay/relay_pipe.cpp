#include "failover/relay/relay_pipe.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <new>
#include <cstring>
#include <utility>

namespace reccl::failover {

// ---------------------------------------------------------------- ring

size_t RelayRing::free() const noexcept { return bytes_ - used(); }

size_t RelayRing::used() const noexcept {
  uint64_t h = c_->head.load(std::memory_order_acquire);
  uint64_t t = c_->tail.load(std::memory_order_acquire);
  return h >= t && h - t <= bytes_ ? static_cast<size_t>(h - t) : 0;
}

std::span<std::byte> RelayRing::writable() const noexcept {
  uint64_t h = c_->head.load(std::memory_order_relaxed);
  size_t off = static_cast<size_t>(h & (bytes_ - 1));
  return {data_ + off, std::min(free(), static_cast<size_t>(bytes_) - off)};
}

void RelayRing::produced(size_t n) noexcept { c_->head.fetch_add(n, std::memory_order_release); }

size_t RelayRing::write(std::span<const std::byte> src) noexcept {
  size_t done = 0;
  while (done < src.size()) {
    auto w = writable();
    if (w.empty()) break;
    size_t n = std::min(w.size(), src.size() - done);
    std::memcpy(w.data(), src.data() + done, n);
    produced(n);
    done += n;
  }
  return done;
}

std::span<const std::byte> RelayRing::readable() const noexcept {
  uint64_t t = c_->tail.load(std::memory_order_relaxed);
  size_t off = static_cast<size_t>(t & (bytes_ - 1));
  return {data_ + off, std::min(used(), static_cast<size_t>(bytes_) - off)};
}

void RelayRing::consumed(size_t n) noexcept { c_->tail.fetch_add(n, std::memory_order_release); }

size_t RelayRing::read(std::span<std::byte> dst) noexcept {
  size_t done = 0;
  while (done < dst.size()) {
    auto r = readable();
    if (r.empty()) break;
    size_t n = std::min(r.size(), dst.size() - done);
    std::memcpy(dst.data() + done, r.data(), n);
    consumed(n);
    done += n;
  }
  return done;
}

bool RelayRing::peek(std::span<std::byte> dst) const noexcept {
  if (used() < dst.size()) return false;
  uint64_t t = c_->tail.load(std::memory_order_relaxed);
  for (size_t i = 0; i < dst.size();) {
    size_t off = static_cast<size_t>((t + i) & (bytes_ - 1));
    size_t n = std::min(dst.size() - i, static_cast<size_t>(bytes_) - off);
    std::memcpy(dst.data() + i, data_ + off, n);
    i += n;
  }
  return true;
}

// ---------------------------------------------------------------- pipe

RelayPipe::RelayPipe(RelayPipe&& o) noexcept
    : mem_(std::move(o.mem_)),
      originWake_(std::move(o.originWake_)),
      relayWake_(std::move(o.relayWake_)),
      shared_(std::exchange(o.shared_, nullptr)),
      mapBytes_(std::exchange(o.mapBytes_, 0)) {}

RelayPipe& RelayPipe::operator=(RelayPipe&& o) noexcept {
  if (this != &o) {
    reset();
    mem_ = std::move(o.mem_);
    originWake_ = std::move(o.originWake_);
    relayWake_ = std::move(o.relayWake_);
    shared_ = std::exchange(o.shared_, nullptr);
    mapBytes_ = std::exchange(o.mapBytes_, 0);
  }
  return *this;
}

RelayPipe::~RelayPipe() { reset(); }

void RelayPipe::reset() noexcept {
  if (shared_) munmap(shared_, mapBytes_);
  shared_ = nullptr;
  mapBytes_ = 0;
}

Result<RelayPipe> RelayPipe::create(size_t ringBytes) {
  ringBytes = std::bit_ceil(std::clamp<size_t>(ringBytes, 64 * 1024, size_t{1} << 30));
  RelayPipe p;
  p.mem_.reset(memfd_create("reccl-relay", MFD_CLOEXEC));
  if (!p.mem_) return Status::FromErrno(errno, "relay pipe: memfd_create");
  p.mapBytes_ = kRelayPipeHeaderBytes + 2 * ringBytes;
  if (ftruncate(p.mem_.get(), static_cast<off_t>(p.mapBytes_)) != 0)
    return Status::FromErrno(errno, "relay pipe: ftruncate");
  void* m = mmap(nullptr, p.mapBytes_, PROT_READ | PROT_WRITE, MAP_SHARED, p.mem_.get(), 0);
  if (m == MAP_FAILED) return Status::FromErrno(errno, "relay pipe: mmap");
  p.shared_ = new (m) RelayPipeShared{};
  p.shared_->ringBytes = static_cast<uint32_t>(ringBytes);
  p.shared_->up.head.store(0);
  p.shared_->up.tail.store(0);
  p.shared_->down.head.store(0);
  p.shared_->down.tail.store(0);
  p.shared_->broken.store(0);
  std::atomic_thread_fence(std::memory_order_release);
  p.shared_->magic = kRelayPipeMagic;
  p.originWake_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  p.relayWake_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!p.originWake_ || !p.relayWake_) return Status::FromErrno(errno, "relay pipe: eventfd");
  return p;
}

Result<RelayPipe> RelayPipe::attach(UniqueFd mem, UniqueFd originWake, UniqueFd relayWake) {
  RelayPipe p;
  p.mem_ = std::move(mem);
  p.originWake_ = std::move(originWake);
  p.relayWake_ = std::move(relayWake);
  struct stat st {};
  if (fstat(p.mem_.get(), &st) != 0) return Status::FromErrno(errno, "relay pipe: fstat");
  size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes < kRelayPipeHeaderBytes + 2 * 64 * 1024 || bytes > kRelayPipeHeaderBytes + (size_t{2} << 30))
    return Status(Errc::kProtocol, "relay pipe: bad size " + std::to_string(bytes));
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, p.mem_.get(), 0);
  if (m == MAP_FAILED) return Status::FromErrno(errno, "relay pipe: mmap");
  p.shared_ = static_cast<RelayPipeShared*>(m);
  p.mapBytes_ = bytes;
  uint32_t rb = p.shared_->ringBytes;
  if (p.shared_->magic != kRelayPipeMagic || !std::has_single_bit(rb) || kRelayPipeHeaderBytes + 2 * size_t{rb} != bytes)
    return Status(Errc::kProtocol, "relay pipe: bad header");
  return p;
}

RelayRing RelayPipe::up() const noexcept {
  auto* base = reinterpret_cast<std::byte*>(shared_) + kRelayPipeHeaderBytes;
  return RelayRing(&shared_->up, base, shared_->ringBytes);
}

RelayRing RelayPipe::down() const noexcept {
  auto* base = reinterpret_cast<std::byte*>(shared_) + kRelayPipeHeaderBytes + shared_->ringBytes;
  return RelayRing(&shared_->down, base, shared_->ringBytes);
}

namespace {
void wake(int fd) noexcept {
  uint64_t one = 1;
  if (fd >= 0) [[maybe_unused]] auto n = ::write(fd, &one, sizeof(one));
}
}  // namespace

void RelayPipe::wakeOrigin() const noexcept { wake(originWake_.get()); }
void RelayPipe::wakeRelay() const noexcept { wake(relayWake_.get()); }

void RelayPipe::drainWake(int fd) noexcept {
  uint64_t v;
  if (fd >= 0) [[maybe_unused]] auto n = ::read(fd, &v, sizeof(v));
}

Status RelayPipe::waitOrigin(int ctrlFd, Deadline d) {
  if (d.expired()) return Status(Errc::kTimeout, "relay pipe: handshake timed out");
  if (shared_->broken.load(std::memory_order_acquire) != 0)
    return Status(Errc::kLinkFailure, "relay pipe: the relay lost its connection");
  pollfd pf[2] = {{originWake_.get(), POLLIN, 0}, {ctrlFd, POLLIN, 0}};
  int left = d.remainingMsForPoll();
  int ms = left < 0 ? 50 : std::min(left, 50);
  if (::poll(pf, ctrlFd >= 0 ? 2 : 1, ms) < 0 && errno != EINTR) return Status::FromErrno(errno, "relay pipe: poll");
  if (ctrlFd >= 0 && (pf[1].revents & (POLLHUP | POLLERR | POLLIN)))
    return Status(Errc::kLinkFailure, "relay pipe: the relay closed the pipe");
  drainWake(originWake_.get());
  return Status::Ok();
}

Status RelayPipe::writeAll(std::span<const std::byte> src, int ctrlFd, Deadline d) {
  auto ring = up();
  size_t done = 0;
  while (done < src.size()) {
    size_t n = ring.write(src.subspan(done));
    done += n;
    if (n) wakeRelay();
    if (done < src.size()) RECCL_TRY(waitOrigin(ctrlFd, d));
  }
  return Status::Ok();
}

Status RelayPipe::readAll(std::span<std::byte> dst, int ctrlFd, Deadline d) {
  auto ring = down();
  size_t done = 0;
  while (done < dst.size()) {
    size_t n = ring.read(dst.subspan(done));
    done += n;
    if (n) wakeRelay();
    if (done >= dst.size()) break;
    Status w = waitOrigin(ctrlFd, d);
    // What the relay wrote before it closed or broke the pipe is still delivered, as a socket
    // delivers the bytes before its FIN: fail only once the ring is empty.
    if (!w.ok() && (w.code() != Errc::kLinkFailure || ring.used() == 0)) return w;
  }
  return Status::Ok();
}

}  // namespace reccl::failover
