#include "transport/shm_ring.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "reccl/common/unique_fd.h"

namespace reccl::transport {

Result<channel::ConnMemory> createShm(const std::string& name, uint32_t slots, size_t chunkBytes) {
  UniqueFd fd(shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return Status::FromErrno(errno, "shm_open " + name);
  size_t bytes = channel::connMemoryBytes(slots, chunkBytes);
  if (ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    shm_unlink(name.c_str());
    return Status::FromErrno(e, "ftruncate " + name);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) {
    int e = errno;
    shm_unlink(name.c_str());
    return Status::FromErrno(e, "mmap " + name);
  }
  channel::ConnMemory m(p, bytes);
  m.initialize(slots, chunkBytes);
  return m;
}

Result<channel::ConnMemory> openShm(const std::string& name, uint32_t slots, size_t chunkBytes) {
  UniqueFd fd(shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600));
  if (!fd) return Status::FromErrno(errno, "shm_open " + name);
  shm_unlink(name.c_str());
  size_t bytes = channel::connMemoryBytes(slots, chunkBytes);
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "fstat " + name);
  if (static_cast<size_t>(st.st_size) != bytes) return Status(Errc::kProtocol, "shared ring " + name + ": wrong size");
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return Status::FromErrno(errno, "mmap " + name);
  channel::ConnMemory m(p, bytes);
  RECCL_TRY(m.validate(slots, chunkBytes));
  return m;
}

void unlinkShm(const std::string& name) noexcept { shm_unlink(name.c_str()); }

int removeStaleShm() noexcept {
  int removed = 0;
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  while (dirent* e = readdir(d)) {
    const char* n = e->d_name;
    if (strncmp(n, "reccl-", 6) != 0) continue;
    char* end = nullptr;
    long pid = strtol(n + 6, &end, 10);
    if (pid <= 0 || !end || *end != '-') continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (shm_unlink((std::string("/") + n).c_str()) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

ShmPath::ShmPath(SocketEngine* engine, UniqueFd side, channel::PortBase* port, bool isSender, std::string desc)
    : watch_(std::make_unique<LivenessPath>(engine, std::move(side), port, isSender)), desc_(std::move(desc)) {
  watch_->start();
}

}  // namespace reccl::transport
