// Drives an NCCL net plugin as NCCL's proxy thread does, between the ranks of `reccl testbed run`
// (RANK, WORLD_SIZE=2): each rank listens WORKER_CONNS times, publishes the handles in a file
// beside the stop file, connects as many send comms to its peer and accepts as many receive comms
// from it, then streams messages both ways, message i over connection i mod WORKER_CONNS (as
// NCCL spreads a peer's traffic over its channels), WORKER_INFLIGHT requests in flight per comm,
// checking every received byte against what the peer sent.
//
// Message i holds WORKER_BYTES or one of a few odd sizes below it (receives are posted for
// WORKER_BYTES, so most arrive short of it), or WORKER_FIXED_BYTES when set. Its first 8 bytes are i, with the top bit on the
// last message; the rest is a pattern of i. After the last come as many empty messages as the
// peer may have posted receives ahead, so both ends close with nothing pending. Tags are the
// sender's rank, as NCCL's.
//
// Handles travel through files beside the stop file (ranks of one machine's testbed), or with
// WORKER_HANDLES_PORT over TCP to MASTER_ADDR:that port (hosts without a shared file system, the
// lab's VMs): rank 0 listens, rank 1 connects; each sends its handles and reads the peer's.
//
// WORKER_DEV: the plugin device every comm listens and connects on (0 by default), or `spread`:
// connection k on device k mod the device count, as NCCL spreads its channels over the NICs.
// "devices N: name name ..." (getProperties' names) is printed before anything connects.
//
// WORKER_CHECK=0 leaves the bytes after the index unwritten and unchecked (a benchmark's timing,
// as nccl-tests times without -c); sizes and indexes are still checked.
//
// Ends after WORKER_ITERS messages, or when WORKER_STOP_FILE appears (WORKER_SECONDS at the
// least). Prints "started rank R" once connected and "done rank R sent S received M bytes B
// seconds T longest-gap-ms G longest-gap-end-ms E failovers F" at the end (G: the longest time
// between two received messages, E: when it ended, CLOCK_MONOTONIC ms; F: failovers of the reccl
// communicators under all the comms), or "error rank R: why" and exits 1.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "nccl_net_abi.h"
#include "reccl/nccl_net_plugin.h"

namespace {

using Clock = std::chrono::steady_clock;

int rank_ = 0;

[[noreturn]] void die(const std::string& why) {
  std::printf("error rank %d: %s\n", rank_, why.c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) die(std::string(what) + " returned " + std::to_string(r));
}

long envLong(const char* name, long def) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : def;
}

void logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level > NCCL_LOG_WARN && !std::getenv("WORKER_VERBOSE")) return;
  va_list ap;
  va_start(ap, fmt);
  // CLOCK_MONOTONIC ms first, to line the plugin's lines up with a test's fault log.
  std::fprintf(stderr, "%.1f rank %d plugin: ",
               std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count(), rank_);
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
}

constexpr uint64_t kLastBit = 1ull << 63;

size_t fixedBytes_ = 0;  // WORKER_FIXED_BYTES: every message this size (8 at the least)

size_t sizeOf(uint64_t i, size_t maxBytes) {
  if (fixedBytes_) return fixedBytes_;
  const size_t odd[] = {maxBytes, 8, maxBytes / 3 + 5, 65535, 4097, maxBytes - 1};
  return std::max<size_t>(8, std::min(maxBytes, odd[i % 6]));
}

// Message i's bytes after its index: a fixed random pattern read from offset i mod 61, so that
// filling and checking run at memcpy/memcmp speed (NCCL touches no byte; a slow check would be
// what the benchmark measures) while bytes of another message still differ from i's.
constexpr size_t kPatternShifts = 61;
std::vector<uint8_t> pattern_;

void makePattern(size_t maxBytes) {
  pattern_.resize(maxBytes + kPatternShifts);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (auto& byte : pattern_) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    byte = static_cast<uint8_t>(x);
  }
}

const uint8_t* patternOf(uint64_t i) { return pattern_.data() + i % kPatternShifts; }

bool check_ = true;  // WORKER_CHECK=0: only sizes and indexes, as nccl-tests times without -c

void fill(uint8_t* p, uint64_t i, size_t bytes, bool last) {
  uint64_t head = i | (last ? kLastBit : 0);
  std::memcpy(p, &head, 8);
  if (check_ && bytes > 8) std::memcpy(p + 8, patternOf(i) + 8, bytes - 8);
}

bool fileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Whole buffers over a blocking socket with a receive/send timeout; false on error or EOF.
bool sendAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}
bool recvAll(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t k = recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// The handles swapped with the peer over TCP (WORKER_HANDLES_PORT), within `deadline`.
std::vector<char> swapHandlesOverTcp(const std::vector<char>& mine, int port, Clock::time_point deadline) {
  const char* master = std::getenv("MASTER_ADDR");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (!master || inet_pton(AF_INET, master, &addr.sin_addr) != 1) die("WORKER_HANDLES_PORT needs MASTER_ADDR (a.b.c.d)");
  int fd = -1;
  if (rank_ == 0) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(l, 1) != 0)
      die("handles: cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno));
    timeval tv{std::max<long>(1, std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now()).count()), 0};
    setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    fd = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    close(l);
    if (fd < 0) die(std::string("handles: no peer connected: ") + std::strerror(errno));
  } else {
    while (true) {
      fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) break;
      if (fd >= 0) close(fd);
      if (Clock::now() > deadline) die(std::string("handles: cannot reach ") + master + ":" + std::to_string(port));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::vector<char> peer(mine.size());
  if (!sendAll(fd, mine.data(), mine.size()) || !recvAll(fd, peer.data(), peer.size()))
    die("handles: the exchange with the peer failed");
  close(fd);
  return peer;
}

}  // namespace

int main() {
  rank_ = static_cast<int>(envLong("RANK", 0));
  const int peer = 1 - rank_;
  const std::string stopFile = std::getenv("WORKER_STOP_FILE") ? std::getenv("WORKER_STOP_FILE") : "";
  const long iters = envLong("WORKER_ITERS", 0);
  const long minSeconds = envLong("WORKER_SECONDS", 0);
  const size_t maxBytes = static_cast<size_t>(envLong("WORKER_BYTES", 1 << 20));
  const int inflight = static_cast<int>(envLong("WORKER_INFLIGHT", 8));
  const int conns = static_cast<int>(envLong("WORKER_CONNS", 1));
  // Between polls that found nothing done (0: yield only, as NCCL's proxy thread).
  const auto pollSleep = std::chrono::microseconds(envLong("WORKER_POLL_US", 20));
  if (stopFile.empty() && iters <= 0) die("set WORKER_ITERS or WORKER_STOP_FILE");
  if (maxBytes < 65536 || maxBytes > (1u << 30) || inflight < 1 || inflight > NCCL_NET_MAX_REQUESTS || conns < 1 ||
      conns > 32)
    die("WORKER_BYTES 64K..1G, WORKER_INFLIGHT 1..32 and WORKER_CONNS 1..32");

  check_ = envLong("WORKER_CHECK", 1) != 0;
  fixedBytes_ = static_cast<size_t>(envLong("WORKER_FIXED_BYTES", 0));
  if (fixedBytes_ && (fixedBytes_ < 8 || fixedBytes_ > maxBytes)) die("WORKER_FIXED_BYTES 8..WORKER_BYTES");
  makePattern(maxBytes);
  const char* path = std::getenv("WORKER_PLUGIN") ? std::getenv("WORKER_PLUGIN") : RECCL_NCCL_NET_PLUGIN_PATH;
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) die(std::string("dlopen: ") + dlerror());
  auto* net = static_cast<ncclNet_v8_t*>(dlsym(lib, "ncclNetPlugin_v8"));
  auto stats = reinterpret_cast<recclNetCommStats_t>(dlsym(lib, "recclNetCommStats"));
  if (!net) die("no ncclNetPlugin_v8 in " + std::string(path));
  check(net->init(logger), "init");
  int ndev = 0;
  check(net->devices(&ndev), "devices");
  if (ndev < 1) die("no device");
  std::string names;
  for (int d = 0; d < ndev; ++d) {
    ncclNetProperties_v8_t p;
    check(net->getProperties(d, &p), "getProperties");
    names += std::string(" ") + p.name;
  }
  std::printf("devices %d:%s\n", ndev, names.c_str());
  const std::string devSpec = std::getenv("WORKER_DEV") ? std::getenv("WORKER_DEV") : "0";
  const bool spread = devSpec == "spread";
  const long fixedDev = spread ? 0 : std::strtol(devSpec.c_str(), nullptr, 10);
  if (!spread && (devSpec.find_first_not_of("0123456789") != std::string::npos || fixedDev >= ndev))
    die("WORKER_DEV: " + devSpec + " is not `spread` or a device of 0.." + std::to_string(ndev - 1));
  auto devOf = [&](int k) { return spread ? k % ndev : static_cast<int>(fixedDev); };

  // Handles travel as NCCL's bootstrap would carry them: through files beside the stop file, or
  // over TCP (the header).
  const std::string base = (stopFile.empty() ? "/tmp/nccl-net-stream" : stopFile) + ".handle.";
  std::vector<char> handles(static_cast<size_t>(conns) * NCCL_NET_HANDLE_MAXSIZE);
  std::vector<void*> listenComms(conns, nullptr);
  for (int k = 0; k < conns; ++k)
    check(net->listen(devOf(k), handles.data() + k * NCCL_NET_HANDLE_MAXSIZE, &listenComms[k]), "listen");
  const auto setupDeadline = Clock::now() + std::chrono::seconds(60);
  const long handlesPort = envLong("WORKER_HANDLES_PORT", 0);
  std::vector<char> peerHandles(handles.size());
  if (handlesPort > 0) {
    if (handlesPort > 65535) die("WORKER_HANDLES_PORT: 1..65535");
    peerHandles = swapHandlesOverTcp(handles, static_cast<int>(handlesPort), setupDeadline);
  } else {
    std::string tmp = base + std::to_string(rank_) + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(handles.data(), static_cast<std::streamsize>(handles.size()));
    if (rename(tmp.c_str(), (base + std::to_string(rank_)).c_str()) != 0) die("cannot publish the handles");
    while (!fileExists(base + std::to_string(peer))) {
      if (Clock::now() > setupDeadline) die("the peer's handles did not appear");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::ifstream(base + std::to_string(peer), std::ios::binary)
        .read(peerHandles.data(), static_cast<std::streamsize>(peerHandles.size()));
  }

  std::vector<void*> sendComms(conns, nullptr), recvComms(conns, nullptr);
  for (int made = 0; made < 2 * conns;) {
    made = 0;
    for (int k = 0; k < conns; ++k) {
      if (!sendComms[k]) check(net->connect(devOf(k), peerHandles.data() + k * NCCL_NET_HANDLE_MAXSIZE, &sendComms[k], nullptr), "connect");
      if (!recvComms[k]) check(net->accept(listenComms[k], &recvComms[k], nullptr), "accept");
      made += (sendComms[k] != nullptr) + (recvComms[k] != nullptr);
    }
    if (Clock::now() > setupDeadline) die("connect/accept did not finish");
    if (made < 2 * conns) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (void* l : listenComms) check(net->closeListen(l), "closeListen");
  unlink((base + std::to_string(rank_)).c_str());
  std::vector<void*> allComms(sendComms);
  allComms.insert(allComms.end(), recvComms.begin(), recvComms.end());
  // A benchmark times the stream, not the in-process detectors' start-up beside it (~0.3 s of
  // CPU per communicator).
  if (envLong("WORKER_WAIT_SOURCE", 0) && stats) {
    for (void* c : allComms) {
      while (true) {
        recclCommStats_t s{};
        s.size = sizeof(s);
        if (stats(c, &s) != 0 || !s.faultSourceStarting) break;
        if (Clock::now() > setupDeadline) die("the fault source did not start");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
  std::printf("started rank %d\n", rank_);
  std::fflush(stdout);

  // Message i goes over connection i mod conns (as NCCL spreads a peer's traffic over its
  // channels' connections); `window` requests in flight in all, `inflight` per connection.
  const int window = inflight * conns;
  std::vector<std::vector<uint8_t>> sendBufs(window, std::vector<uint8_t>(maxBytes));
  std::vector<std::vector<uint8_t>> recvBufs(window, std::vector<uint8_t>(maxBytes));
  std::vector<void*> sendMrs(conns), recvMrs(conns);
  for (int k = 0; k < conns; ++k) {
    check(net->regMr(sendComms[k], sendBufs[0].data(), maxBytes, NCCL_PTR_HOST, &sendMrs[k]), "regMr");
    check(net->regMr(recvComms[k], recvBufs[0].data(), maxBytes, NCCL_PTR_HOST, &recvMrs[k]), "regMr");
  }

  struct Posted {
    void* request;
    int buf;
    uint64_t index;
  };
  std::deque<Posted> sends, recvs;
  uint64_t nextSend = 0, nextRecv = 0;
  uint64_t lastSent = UINT64_MAX;     // index of the last data message, once posted
  uint64_t recvTotal = UINT64_MAX;    // receives in all, once the peer's last message arrived
  uint64_t sendTotal = UINT64_MAX;
  uint64_t bytesReceived = 0;
  uint64_t received = 0;
  const auto start = Clock::now();
  auto lastArrival = start;
  double longestGapMs = 0;  // between two receive completions: a failover's stall shows here
  Clock::time_point longestGapEnd{};
  auto stopping = [&] {
    if (iters > 0 && static_cast<long>(nextSend) >= iters - 1) return true;
    if (stopFile.empty()) return false;
    return Clock::now() - start >= std::chrono::seconds(minSeconds) && fileExists(stopFile);
  };
  const auto runDeadline = Clock::now() + std::chrono::seconds(envLong("WORKER_TIMEOUT", 600));
  while (nextSend < sendTotal || !sends.empty() || nextRecv < recvTotal || !recvs.empty()) {
    if (Clock::now() > runDeadline) die("the run passed WORKER_TIMEOUT");
    while (static_cast<int>(sends.size()) < window && nextSend < sendTotal) {
      int b = static_cast<int>(nextSend % window);
      int k = static_cast<int>(nextSend % conns);
      size_t bytes = 0;
      bool last = false;
      if (lastSent == UINT64_MAX) {
        last = stopping();
        bytes = last ? 8 : sizeOf(nextSend, maxBytes);
        fill(sendBufs[b].data(), nextSend, bytes, last);
      }
      void* req = nullptr;
      check(net->isend(sendComms[k], sendBufs[b].data(), static_cast<int>(bytes), rank_, sendMrs[k], &req), "isend");
      if (!req) break;
      if (last) {
        lastSent = nextSend;
        sendTotal = nextSend + window;  // the empty messages after it
      }
      sends.push_back({req, b, nextSend++});
    }
    while (static_cast<int>(recvs.size()) < window && nextRecv < recvTotal) {
      int b = static_cast<int>(nextRecv % window);
      int k = static_cast<int>(nextRecv % conns);
      void* data = recvBufs[b].data();
      int size = static_cast<int>(maxBytes);
      int tag = peer;  // NCCL's tag: the sender's rank
      void* req = nullptr;
      check(net->irecv(recvComms[k], 1, &data, &size, &tag, &recvMrs[k], &req), "irecv");
      if (!req) break;
      recvs.push_back({req, b, nextRecv++});
    }
    bool progressed = false;
    if (!sends.empty()) {
      int done = 0;
      check(net->test(sends.front().request, &done, nullptr), "test (send)");
      if (done) {
        sends.pop_front();
        progressed = true;
      }
    }
    if (!recvs.empty()) {
      int done = 0, size = -1;
      check(net->test(recvs.front().request, &done, &size), "test (receive)");
      if (done) {
        Posted p = recvs.front();
        recvs.pop_front();
        progressed = true;
        ++received;
        bytesReceived += static_cast<uint64_t>(size);
        auto now = Clock::now();
        double gapMs = std::chrono::duration<double, std::milli>(now - lastArrival).count();
        if (received > 1 && gapMs > longestGapMs) {
          longestGapMs = gapMs;
          longestGapEnd = now;
        }
        lastArrival = now;
        const uint8_t* got = recvBufs[p.buf].data();
        if (recvTotal != UINT64_MAX && p.index > recvTotal - window) {
          if (size != 0) die("message " + std::to_string(p.index) + " after the last has " + std::to_string(size) + " bytes");
        } else {
          uint64_t head = 0;
          if (size >= 8) std::memcpy(&head, got, 8);
          bool last = (head & kLastBit) != 0;
          size_t want = last ? 8 : sizeOf(p.index, maxBytes);
          if (static_cast<size_t>(size) != want || (head & ~kLastBit) != p.index)
            die("message " + std::to_string(p.index) + ": " + std::to_string(size) + " bytes, index " +
                std::to_string(head & ~kLastBit) + " (want " + std::to_string(want) + " bytes)");
          if (check_ && want > 8 && std::memcmp(got + 8, patternOf(p.index) + 8, want - 8) != 0) {
            size_t at = 8;
            while (got[at] == patternOf(p.index)[at]) ++at;
            die("message " + std::to_string(p.index) + ": wrong byte at " + std::to_string(at));
          }
          if (last) recvTotal = p.index + window;
        }
      }
    }
    // NCCL's proxy thread polls without a pause; on a machine with CPUs to spare for the
    // connections' own threads that costs nothing, on two vCPUs it takes theirs.
    if (!progressed) {
      if (pollSleep.count() > 0) std::this_thread::sleep_for(pollSleep);
      else std::this_thread::yield();
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  uint64_t failovers = 0;
  for (void* c : allComms) {
    recclCommStats_t st{};
    st.size = sizeof(st);
    if (stats && stats(c, &st) == 0) failovers += st.failovers;
  }
  for (int k = 0; k < conns; ++k) {
    check(net->deregMr(sendComms[k], sendMrs[k]), "deregMr");
    check(net->deregMr(recvComms[k], recvMrs[k]), "deregMr");
    check(net->closeSend(sendComms[k]), "closeSend");
    check(net->closeRecv(recvComms[k]), "closeRecv");
  }
  // When the longest gap ended, in CLOCK_MONOTONIC ms (steady_clock), to line up with a fault log.
  const double gapEndMs =
      std::chrono::duration<double, std::milli>(longestGapEnd.time_since_epoch()).count();
  std::printf("done rank %d sent %llu received %llu bytes %llu seconds %.3f longest-gap-ms %.2f "
              "longest-gap-end-ms %.1f failovers %llu\n", rank_,
              static_cast<unsigned long long>(lastSent + 1), static_cast<unsigned long long>(received - window + 1),
              static_cast<unsigned long long>(bytesReceived), seconds, longestGapMs, gapEndMs,
              static_cast<unsigned long long>(failovers));
  std::fflush(stdout);
  return 0;
}
