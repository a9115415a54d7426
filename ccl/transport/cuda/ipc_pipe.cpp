#include "transport/cuda/ipc_pipe.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "transport/cuda/cuda_status.h"
#include "transport/cuda/device_probe.h"

namespace reccl::cuda {

// ---------------------------------------------------------------- ring

size_t IpcRing::used() const noexcept {
  uint64_t h = c_->head.load(std::memory_order_acquire);
  uint64_t t = c_->tail.load(std::memory_order_acquire);
  return h >= t && h - t <= bytes_ ? static_cast<size_t>(h - t) : 0;
}

Status IpcRing::transfer(uint64_t pos, std::byte* ext, size_t n, bool intoRing, Deadline d) {
  size_t off = static_cast<size_t>(pos & (bytes_ - 1));
  size_t first = std::min(n, static_cast<size_t>(bytes_) - off);
  std::pair<std::byte*, size_t> parts[2] = {{data_ + off, first}, {data_, n - first}};
  size_t at = 0;
  for (auto [ring, len] : parts) {
    if (len == 0) continue;
    RECCL_CUDA_TRY(intoRing ? cudaMemcpyAsync(ring, ext + at, len, cudaMemcpyDefault, stream_)
                            : cudaMemcpyAsync(ext + at, ring, len, cudaMemcpyDefault, stream_));
    at += len;
  }
  RECCL_CUDA_TRY(cudaEventRecord(event_, stream_));
  return waitEvent(event_, d).Wrap(intoRing ? "ipc pipe write" : "ipc pipe read");
}

Result<size_t> IpcRing::write(const void* src, size_t n, Deadline d) {
  n = std::min(n, free());
  if (n == 0) return size_t{0};
  RECCL_TRY(transfer(c_->head.load(std::memory_order_relaxed), static_cast<std::byte*>(const_cast<void*>(src)), n, true, d));
  c_->head.fetch_add(n, std::memory_order_release);  // published only once the copy is done
  return n;
}

Result<size_t> IpcRing::read(void* dst, size_t n, Deadline d) {
  n = std::min(n, used());
  if (n == 0) return size_t{0};
  RECCL_TRY(transfer(c_->tail.load(std::memory_order_relaxed), static_cast<std::byte*>(dst), n, false, d));
  c_->tail.fetch_add(n, std::memory_order_release);  // freed only once the copy is done
  return n;
}

// ---------------------------------------------------------------- pipe

IpcPipe::IpcPipe(IpcPipe&& o) noexcept { *this = std::move(o); }

IpcPipe& IpcPipe::operator=(IpcPipe&& o) noexcept {
  if (this != &o) {
    unmap();
    mem_ = std::move(o.mem_);
    originWake_ = std::move(o.originWake_);
    relayWake_ = std::move(o.relayWake_);
    shared_ = std::exchange(o.shared_, nullptr);
    mapBytes_ = std::exchange(o.mapBytes_, 0);
    // The device memory goes before the stream that copied into it (members below).
    upEvent_ = std::move(o.upEvent_);
    downEvent_ = std::move(o.downEvent_);
    upStream_ = std::move(o.upStream_);
    downStream_ = std::move(o.downStream_);
    opened_ = std::move(o.opened_);
    owned_ = std::move(o.owned_);
    rings_ = std::exchange(o.rings_, nullptr);
  }
  return *this;
}

IpcPipe::~IpcPipe() {
  // A copy of this end may still run on its stream (a deadline gave up on it): let it end
  // before the memory goes.
  for (const Stream* s : {&upStream_, &downStream_})
    if (*s) (void)cudaStreamSynchronize(s->get());
  unmap();
}

void IpcPipe::unmap() noexcept {
  if (shared_) munmap(shared_, mapBytes_);
  shared_ = nullptr;
  mapBytes_ = 0;
}

namespace {

Status makeEndObjects(Stream* s, Event* e) {
  RECCL_ASSIGN_OR_RETURN(*s, Stream::create());
  RECCL_ASSIGN_OR_RETURN(*e, Event::create());
  return Status::Ok();
}

Status makeEndObjects(Stream* s1, Event* e1, Stream* s2, Event* e2) {
  RECCL_TRY(makeEndObjects(s1, e1));
  return makeEndObjects(s2, e2);
}

}  // namespace

Result<IpcPipe> IpcPipe::create(size_t ringBytes) {
  if (deviceCount() == 0) return Status(Errc::kUnsupported, "ipc pipe: " + noDeviceReason());
  ringBytes = std::bit_ceil(std::clamp<size_t>(ringBytes, 64 * 1024, size_t{1} << 30));
  IpcPipe p;
  int dev = 0;
  RECCL_CUDA_TRY(cudaGetDevice(&dev));
  RECCL_TRY(makeEndObjects(&p.upStream_, &p.upEvent_, &p.downStream_, &p.downEvent_));
  RECCL_ASSIGN_OR_RETURN(p.owned_, DeviceBuffer::create(2 * ringBytes));
  p.rings_ = p.owned_.data();
  cudaIpcMemHandle_t handle{};
  RECCL_CUDA_TRY(cudaIpcGetMemHandle(&handle, p.rings_));

  p.mem_.reset(memfd_create("reccl-cuda-relay", MFD_CLOEXEC));
  if (!p.mem_) return Status::FromErrno(errno, "ipc pipe: memfd_create");
  p.mapBytes_ = kIpcPipeHeaderBytes;
  if (ftruncate(p.mem_.get(), static_cast<off_t>(p.mapBytes_)) != 0)
    return Status::FromErrno(errno, "ipc pipe: ftruncate");
  void* m = mmap(nullptr, p.mapBytes_, PROT_READ | PROT_WRITE, MAP_SHARED, p.mem_.get(), 0);
  if (m == MAP_FAILED) return Status::FromErrno(errno, "ipc pipe: mmap");
  p.shared_ = new (m) IpcPipeShared{};
  p.shared_->ringBytes = static_cast<uint32_t>(ringBytes);
  p.shared_->device = dev;
  p.shared_->mem = handle;
  p.shared_->up.head.store(0);
  p.shared_->up.tail.store(0);
  p.shared_->down.head.store(0);
  p.shared_->down.tail.store(0);
  p.shared_->broken.store(0);
  std::atomic_thread_fence(std::memory_order_release);
  p.shared_->magic = kIpcPipeMagic;
  p.originWake_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  p.relayWake_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!p.originWake_ || !p.relayWake_) return Status::FromErrno(errno, "ipc pipe: eventfd");
  return p;
}

Status IpcPipe::checkHeader(uint32_t magic, uint32_t ringBytes, size_t bytes) {
  if (bytes != kIpcPipeHeaderBytes) return Status(Errc::kProtocol, "ipc pipe: bad size " + std::to_string(bytes));
  if (magic != kIpcPipeMagic) return Status(Errc::kProtocol, "ipc pipe: bad magic");
  if (!std::has_single_bit(ringBytes) || ringBytes < 64 * 1024 || ringBytes > (1u << 30))
    return Status(Errc::kProtocol, "ipc pipe: bad ring size " + std::to_string(ringBytes));
  return Status::Ok();
}

Result<IpcPipe> IpcPipe::attach(UniqueFd mem, UniqueFd originWake, UniqueFd relayWake) {
  IpcPipe p;
  p.mem_ = std::move(mem);
  p.originWake_ = std::move(originWake);
  p.relayWake_ = std::move(relayWake);
  struct stat st {};
  if (fstat(p.mem_.get(), &st) != 0) return Status::FromErrno(errno, "ipc pipe: fstat");
  size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes != kIpcPipeHeaderBytes) return Status(Errc::kProtocol, "ipc pipe: bad size " + std::to_string(bytes));
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, p.mem_.get(), 0);
  if (m == MAP_FAILED) return Status::FromErrno(errno, "ipc pipe: mmap");
  p.shared_ = static_cast<IpcPipeShared*>(m);
  p.mapBytes_ = bytes;
  RECCL_TRY(checkHeader(p.shared_->magic, p.shared_->ringBytes, bytes));
  if (deviceCount() == 0) return Status(Errc::kUnsupported, "ipc pipe: " + noDeviceReason());
  RECCL_TRY(makeEndObjects(&p.upStream_, &p.upEvent_, &p.downStream_, &p.downEvent_));
  RECCL_ASSIGN_OR_RETURN(p.opened_, IpcMapping::open(p.shared_->mem));
  p.rings_ = p.opened_.data();
  return p;
}

IpcRing IpcPipe::up() const noexcept {
  return IpcRing(&shared_->up, rings_, shared_->ringBytes, upStream_.get(), upEvent_.get());
}

IpcRing IpcPipe::down() const noexcept {
  return IpcRing(&shared_->down, rings_ + shared_->ringBytes, shared_->ringBytes, downStream_.get(),
                 downEvent_.get());
}

namespace {
void wake(int fd) noexcept {
  uint64_t one = 1;
  if (fd >= 0) [[maybe_unused]] auto n = ::write(fd, &one, sizeof(one));
}
}  // namespace

void IpcPipe::wakeOrigin() const noexcept { wake(originWake_.get()); }
void IpcPipe::wakeRelay() const noexcept { wake(relayWake_.get()); }
void IpcPipe::wakeOther(int self) const noexcept { wake(self == originWake_.get() ? relayWake_.get() : originWake_.get()); }

void IpcPipe::drainWake(int fd) noexcept {
  uint64_t v;
  if (fd >= 0) [[maybe_unused]] auto n = ::read(fd, &v, sizeof(v));
}

void IpcPipe::markBroken(IpcPipeBreak why) noexcept {
  shared_->broken.store(static_cast<uint32_t>(why), std::memory_order_release);
  wakeOrigin();
}

Status IpcPipe::waitWake(int self, int ctrlFd, Deadline d) {
  if (d.expired()) return Status(Errc::kTimeout, "ipc pipe: transfer timed out");
  if (shared_->broken.load(std::memory_order_acquire) != 0)
    return Status(Errc::kLinkFailure, "ipc pipe: the relay lost its connection");
  pollfd pf[2] = {{self, POLLIN, 0}, {ctrlFd, POLLIN, 0}};
  int left = d.remainingMsForPoll();
  int ms = left < 0 ? 50 : std::min(left, 50);
  if (::poll(pf, ctrlFd >= 0 ? 2 : 1, ms) < 0 && errno != EINTR) return Status::FromErrno(errno, "ipc pipe: poll");
  if (ctrlFd >= 0 && (pf[1].revents & (POLLHUP | POLLERR | POLLIN)))
    return Status(Errc::kLinkFailure, "ipc pipe: the other end closed the pipe");
  drainWake(self);
  return Status::Ok();
}

Status IpcPipe::writeAll(const IpcRing& ring, const void* src, size_t n, int self, int ctrlFd, Deadline d) {
  IpcRing r = ring;
  size_t done = 0;
  while (done < n) {
    RECCL_ASSIGN_OR_RETURN(size_t k, r.write(static_cast<const std::byte*>(src) + done, n - done, d));
    done += k;
    if (k) wakeOther(self);
    if (done < n) RECCL_TRY(waitWake(self, ctrlFd, d));
  }
  return Status::Ok();
}

Status IpcPipe::readAll(const IpcRing& ring, void* dst, size_t n, int self, int ctrlFd, Deadline d) {
  IpcRing r = ring;
  size_t done = 0;
  while (done < n) {
    RECCL_ASSIGN_OR_RETURN(size_t k, r.read(static_cast<std::byte*>(dst) + done, n - done, d));
    done += k;
    if (k) wakeOther(self);
    if (done >= n) break;
    Status w = waitWake(self, ctrlFd, d);
    if (w.ok()) continue;
    // What the other end wrote before it closed or broke the pipe is still delivered, as a
    // socket delivers the bytes before its FIN: fail only once the ring is empty.
    if (w.code() != Errc::kLinkFailure || r.used() == 0) return w;
  }
  return Status::Ok();
}

}  // namespace reccl::cuda
