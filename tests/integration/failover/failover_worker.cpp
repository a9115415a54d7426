// A rank for the failover tests: runs a collective loop while rails go down and up, and checks
// every result bit for bit against the closed-form fault-free result (small integers in float32:
// every sum is exact, whatever the reduction order).
//
// Env: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (reccl testbed run), WORKER_ITERS (200),
// WORKER_COUNT (elements, 1M), WORKER_INPLACE=1 (allreduce in place: the input is copied into
// the output buffer, which is both; the fault triggers need a sentinel-filled output, so use it
// with faults from outside), WORKER_COLL (allreduce, allgather, reducescatter, broadcast,
// reduce, alltoall, sendrecv, or all: one after the other in that order; also gather and scatter,
// which are not in all), WORKER_SECONDS (run
// until rank 0 has run this long, agreed on by a 1-element max-allreduce per iteration, instead
// of a fixed count; with WORKER_STOP_FILE also until that file exists: the test creates it when
// its faults are done; with WORKER_MIN_ITERS also not before that many iterations, and rank 0
// prints "min iters reached" when it gets there), WORKER_BCAST_ROOT / WORKER_REDUCE_ROOT /
// WORKER_GATHER_ROOT / WORKER_SCATTER_ROOT (default: iteration % ranks), WORKER_START_DELAY_MS (0: a pause after "started", before the first call),
// WORKER_WAIT_SOURCE=1 (after "started", wait until the fault source finished starting, at most
// 60 s, then a barrier and "settled source rank R NAME").
// sendrecv is one-way: rank r < n/2 sends to r + n/2 (host-major ranks: first half of the hosts
// to the second).
//
// Fault hook (test only; the library knows nothing of it): WORKER_FAULTS="IT/WHEN/NETNS/DEV[/RANK],..."
// makes rank RANK (default WORKER_FAULT_RANK, 0) take device DEV of namespace NETNS ("-": its
// own; "@lab": the cable of this lab VM's NIC DEV, pulled through the qemu monitor, docs/lab.md;
// DEV may then be "rail0+rail1")
// admin down (SIOCSIFFLAGS on a socket made in that namespace) while the collective of
// iteration IT runs, then up again after it, and wait WORKER_SETTLE_MS (800) for the fail-back
// before going on. A trigger thread watches this rank's output buffer (initialized to a sentinel)
// to place the fault:
//   mid  when the first of 16 sampled output elements (those the network fills) has landed:
//        some data arrived, more is to come (RANK must receive data in that collective);
//   rs   (ring allreduce, 2 ranks, one round) at entry, while the other ranks enter
//        WORKER_LATE_MS (300) late: the reduce-scatter step cannot have completed;
//   ag   (same) when this rank's own block is reduced (reduce-scatter done, all-gather begun);
//        this rank enters WORKER_LATE_MS late so that its peer waits in its all-gather.
// After the device went down it reads the buffer again and prints
//   "fault rank R iteration K coll C when W: hit|missed (...)"
// (hit: the collective was still in that phase when the device was down) and, once the phase
// ended, whether a migration had committed before ("migrated in phase yes|no"); for an @lab
// cable also "timeline rank R signal_ms S resume_ms M source X", from the carrier loss
// (Trigger::printTimeline). A missed fault, and a phase fault (rs, ag) whose phase ended without a
// migration (what it awaited had reached the socket before the device went down), is tried again
// WORKER_FAULT_STRIDE iterations later (default: the rotation length), at most
// WORKER_FAULT_ATTEMPTS (3) times.
// WORKER_CPU=1 (bench/bookkeeping.sh): instead of the loop, the CPU cost of the collective work
// alone: after WORKER_CPU_SETTLE_MS (2000: set-up work such as loading the detector ends first)
// and 2 warm-up calls, WORKER_ITERS allreduces of WORKER_COUNT floats, measured with
// getrusage(RUSAGE_SELF) (user + sys of every thread of the process) and the wall clock; prints
// "cpu rank R calls N cpu_us X wall_us Y" (the last result is checked; exit 1 if wrong).
// WORKER_PAUSE="IT/MS": sleep MS ms before the collective of iteration IT (the peers wait in
// theirs; give it to one rank, Job's per-rank environment). WORKER_HOLD_FAILED_MS=N: after a failed call, keep the failed
// communicator N ms before aborting it (its failover threads still answer the peers meanwhile,
// as in an application that aborts late); "holding failed rank R" is printed first.
// WORKER_PROGRESS_MS=N: "progress rank R iters K rails U at_ns T" every N ms and whenever the
// number of rails up here (recclCommStats_t.railsUp) changes, checked after each iteration (T:
// CLOCK_MONOTONIC ns, the clock of every process on the machine, for a test's own timeline).
// Output: "started rank R" once connected; "done rank R iters N secs S failovers F failbacks B
// resent X dup D last_us L rails_up U standby_used S max_iter_us M" and "source rank R KIND NAME"
// (the fault source in use, recclCommStats_t) at the end, then "destroyed rank R destroy_us U rc
// C" (how long recclCommDestroy took, and its result: not recclSuccess exits 10 + C); on failure "worker rank R iteration K:
// <error>" (stderr), then "failed rank R at_ns T call_us U" (when the failing call returned; U:
// from the start of that iteration's collective until it returned), the same
// counters as "stats rank R iters ..." and the abort's line (abortAfterError).
// Exit: 0 all correct, 1 wrong result, 2 bad fault plan, 10 + recclResult_t of the first failing call.
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "reccl/reccl.h"
#include "source_wait.h"

namespace {

using Clock = std::chrono::steady_clock;

float val(int rank, size_t i, int it) { return static_cast<float>((i * 7 + rank * 13 + it * 3) % 32); }

const char* kColls[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv"};
constexpr int kNumColls = 7;
constexpr float kSentinel = -1.0f;

int envInt(const char* name, int dflt) { return getenv(name) ? atoi(getenv(name)) : dflt; }

// Runs one collective and checks it; returns 0, 1 (wrong) or 10 + rc. `out` must already hold
// outCountFor(...) sentinels (the fault trigger watches it while the call runs).
struct Shape {
  size_t inCount = 0;
  size_t outCount = 0;
};
Shape shapeOf(const std::string& coll, int n, size_t count) {
  size_t per = count / n;
  if (coll == "allgather") return {per, per * n};
  if (coll == "reducescatter") return {per * n, per};
  if (coll == "alltoall") return {per * n, per * n};
  if (coll == "gather") return {per, per * n};
  if (coll == "scatter") return {per * n, per};
  return {count, count};
}

int rootOf(const char* env, int it, int n) { return getenv(env) ? atoi(getenv(env)) % n : it % n; }

int runOne(const std::string& coll, recclComm_t comm, int rank, int n, size_t count, int it, std::vector<float>& in,
           std::vector<float>& out, std::vector<float>& want) {
  recclResult_t rc = recclSuccess;
  Shape sh = shapeOf(coll, n, count);
  size_t per = count / n;
  in.resize(sh.inCount);
  for (size_t i = 0; i < sh.inCount; ++i) in[i] = val(rank, i, it);
  want.assign(sh.outCount, 0.0f);
  bool defined = true;  // is this rank's output defined by the collective?
  if (coll == "allreduce") {
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) want[i] += val(r, i, it);
    if (getenv("WORKER_INPLACE") && atoi(getenv("WORKER_INPLACE")) != 0) {
      std::memcpy(out.data(), in.data(), count * sizeof(float));
      rc = recclAllReduce(out.data(), out.data(), count, recclFloat32, recclSum, comm, nullptr);
    } else {
      rc = recclAllReduce(in.data(), out.data(), count, recclFloat32, recclSum, comm, nullptr);
    }
  } else if (coll == "allgather") {
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < per; ++i) want[r * per + i] = val(r, i, it);
    rc = recclAllGather(in.data(), out.data(), per, recclFloat32, comm, nullptr);
  } else if (coll == "reducescatter") {
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < per; ++i) want[i] += val(r, rank * per + i, it);
    rc = recclReduceScatter(in.data(), out.data(), per, recclFloat32, recclSum, comm, nullptr);
  } else if (coll == "broadcast") {
    int root = rootOf("WORKER_BCAST_ROOT", it, n);
    for (size_t i = 0; i < count; ++i) want[i] = val(root, i, it);
    rc = recclBroadcast(in.data(), out.data(), count, recclFloat32, root, comm, nullptr);
  } else if (coll == "reduce") {
    int root = rootOf("WORKER_REDUCE_ROOT", it, n);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) want[i] += val(r, i, it);
    rc = recclReduce(in.data(), out.data(), count, recclFloat32, recclSum, root, comm, nullptr);
    defined = rank == root;
  } else if (coll == "alltoall") {
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < per; ++i) want[r * per + i] = val(r, rank * per + i, it);
    rc = recclAllToAll(in.data(), out.data(), per, recclFloat32, comm, nullptr);
  } else if (coll == "gather") {
    int root = rootOf("WORKER_GATHER_ROOT", it, n);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < per; ++i) want[r * per + i] = val(r, i, it);
    rc = recclGather(in.data(), out.data(), per, recclFloat32, root, comm, nullptr);
    defined = rank == root;
  } else if (coll == "scatter") {
    int root = rootOf("WORKER_SCATTER_ROOT", it, n);
    for (size_t i = 0; i < per; ++i) want[i] = val(root, rank * per + i, it);
    rc = recclScatter(in.data(), out.data(), per, recclFloat32, root, comm, nullptr);
  } else if (coll == "sendrecv") {
    int half = n / 2;
    if (half == 0) {
      defined = false;
    } else if (rank < half) {
      rc = recclGroupStart();
      if (rc == recclSuccess) rc = recclSend(in.data(), count, recclFloat32, rank + half, comm, nullptr);
      recclResult_t e = recclGroupEnd();
      if (rc == recclSuccess) rc = e;
      defined = false;
    } else if (rank < 2 * half) {
      for (size_t i = 0; i < count; ++i) want[i] = val(rank - half, i, it);
      rc = recclGroupStart();
      if (rc == recclSuccess) rc = recclRecv(out.data(), count, recclFloat32, rank - half, comm, nullptr);
      recclResult_t e = recclGroupEnd();
      if (rc == recclSuccess) rc = e;
    } else {
      defined = false;  // odd rank count: the last rank sits this one out
    }
  } else {
    fprintf(stderr, "worker: unknown WORKER_COLL %s\n", coll.c_str());
    return 1;
  }
  if (rc != recclSuccess) {
    fprintf(stderr, "worker rank %d iteration %d: %s: %s\n", rank, it, recclGetErrorString(rc),
            recclGetLastError(comm));
    return 10 + rc;
  }
  if (defined && std::memcmp(out.data(), want.data(), sh.outCount * sizeof(float)) != 0) {
    size_t bad = 0;
    while (bad < sh.outCount && std::memcmp(&out[bad], &want[bad], sizeof(float)) == 0) ++bad;
    fprintf(stderr, "worker rank %d iteration %d: wrong %s result at %zu: %g != %g\n", rank, it, coll.c_str(), bad,
            out[bad], want[bad]);
    return 1;
  }
  return 0;
}

// ---- fault hook ----------------------------------------------------------------------------

struct Fault {
  int iter = 0;
  std::string when;  // mid | rs | ag
  std::string netns;  // "-": own
  std::string dev;
  int rank = 0;      // the rank that injects
  int fd = -1;       // AF_INET socket living in netns (device ioctls act in the socket's netns)
  bool hit = false;
  Clock::time_point carrierDownAt{};  // @lab: when this guest first read the carrier as lost
};

// A socket in the named namespace: made on a thread that joined it (setns affects that thread
// only), so this process stays where it is.
int socketIn(const std::string& netns) {
  if (netns == "-" || netns == "@lab") return socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  std::string path = "/run/netns/" + netns;
  int nsfd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (nsfd < 0) {
    fprintf(stderr, "worker: open %s: %s\n", path.c_str(), strerror(errno));
    return -1;
  }
  int fd = -1;
  std::thread t([&] {
    if (setns(nsfd, CLONE_NEWNET) != 0) {
      fprintf(stderr, "worker: setns %s: %s\n", path.c_str(), strerror(errno));
      return;
    }
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  });
  t.join();
  close(nsfd);
  return fd;
}

bool setAdmin(Fault& f, bool up) {
  if (f.netns == "@lab") {
    // The lab runner hands this line to the VM's qemu monitor: the virtio NIC loses its carrier
    // the way a physical NIC's driver reports a pulled cable.
    // DEV may name several NICs joined by '+' (both rails of a host at once). The host serves the
    // request when it next reads the console: returns once every NIC's carrier is as asked.
    std::vector<std::string> devs;
    for (size_t p = 0;;) {
      size_t q = f.dev.find('+', p);
      devs.push_back(f.dev.substr(p, q == std::string::npos ? q : q - p));
      if (q == std::string::npos) break;
      p = q + 1;
    }
    auto t0 = Clock::now();
    for (const auto& d : devs) printf("\n@@lab-monitor set_link %s %s\n", d.c_str(), up ? "on" : "off");
    fflush(stdout);
    auto carrierIs = [&](const std::string& d) {
      char c = 0;
      int fd = open(("/sys/class/net/" + d + "/carrier").c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        if (read(fd, &c, 1) != 1) c = 0;
        close(fd);
      }
      return c == (up ? '1' : '0');
    };
    // Read every millisecond: the carrier loss is where the migration timeline starts.
    while (!std::all_of(devs.begin(), devs.end(), carrierIs)) {
      if (Clock::now() - t0 > std::chrono::seconds(30)) {
        fprintf(stderr, "worker: the carrier of %s did not go %s within 30 s\n", f.dev.c_str(), up ? "up" : "down");
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!up) f.carrierDownAt = Clock::now();
    printf("cable %s %s: carrier %s %.1f ms after the request\n", f.dev.c_str(), up ? "on" : "off", up ? "up" : "down",
           std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    return true;
  }
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, f.dev.c_str(), IFNAMSIZ - 1);
  if (ioctl(f.fd, SIOCGIFFLAGS, &ifr) != 0) {
    fprintf(stderr, "worker: SIOCGIFFLAGS %s/%s: %s\n", f.netns.c_str(), f.dev.c_str(), strerror(errno));
    return false;
  }
  if (up)
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  else
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags & ~IFF_UP);
  if (ioctl(f.fd, SIOCSIFFLAGS, &ifr) != 0) {
    fprintf(stderr, "worker: SIOCSIFFLAGS %s/%s %s: %s\n", f.netns.c_str(), f.dev.c_str(), up ? "up" : "down",
            strerror(errno));
    return false;
  }
  return true;
}

bool parseFaults(const char* spec, int dfltRank, std::vector<Fault>* out) {
  std::string s = spec ? spec : "";
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    std::vector<std::string> parts;
    size_t p = 0;
    for (;;) {
      size_t q = item.find('/', p);
      parts.push_back(item.substr(p, q == std::string::npos ? std::string::npos : q - p));
      if (q == std::string::npos) break;
      p = q + 1;
    }
    if (parts.size() < 4 || parts.size() > 5 || (parts[1] != "mid" && parts[1] != "rs" && parts[1] != "ag") ||
        parts[3].empty()) {
      fprintf(stderr, "worker: WORKER_FAULTS: bad entry '%s' (want IT/mid|rs|ag/NETNS/DEV[/RANK])\n", item.c_str());
      return false;
    }
    Fault f;
    f.iter = atoi(parts[0].c_str());
    f.when = parts[1];
    f.netns = parts[2];
    f.dev = parts[3];
    f.rank = parts.size() == 5 ? atoi(parts[4].c_str()) : dfltRank;
    out->push_back(f);
  }
  return true;
}

uint32_t bitsAt(const std::vector<float>& v, size_t i) {
  return __atomic_load_n(reinterpret_cast<const uint32_t*>(v.data() + i), __ATOMIC_ACQUIRE);
}
bool landed(const std::vector<float>& v, size_t i) {
  float s = kSentinel;
  uint32_t sb;
  std::memcpy(&sb, &s, sizeof(sb));
  return bitsAt(v, i) != sb;
}

long long monoNs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

recclCommStats_t statsOf(recclComm_t comm) {
  recclCommStats_t st{};
  st.size = sizeof(st);
  recclCommGetStats(comm, &st);
  return st;
}
uint64_t failoversOf(recclComm_t comm) { return statsOf(comm).failovers; }

// Watches `out` while the collective runs and takes the device down at the chosen moment.
// `samples`: output elements the network fills (16 spread over the output, minus what this rank
// copies from its own input at the start).
class Trigger {
 public:
  Trigger(Fault& f, recclComm_t comm, int rank, int it, const std::string& coll, const std::vector<float>& out,
          std::vector<size_t> samples)
      : f_(f), comm_(comm), rank_(rank), it_(it), coll_(coll), out_(out), samples_(std::move(samples)) {
    thread_ = std::thread([this] { run(); });
  }
  ~Trigger() {
    finished_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  bool downed() const { return downed_; }

 private:
  int landedSamples() const {
    int k = 0;
    for (size_t i : samples_) k += landed(out_, i);
    return k;
  }
  void run() {
    size_t last = out_.size() - 1;
    size_t half = out_.size() / 2;  // rs/ag: 2 ranks, one channel, one round
    size_t ownFirst = rank_ == 0 ? 0 : half, ownLast = rank_ == 0 ? half - 1 : last;
    size_t peerLast = rank_ == 0 ? last : half - 1;
    int total = static_cast<int>(samples_.size());
    uint64_t before = failoversOf(comm_);
    auto deadline = Clock::now() + std::chrono::seconds(20);
    // Wait for the moment: spin briefly (the moment is usually close), then poll.
    if (f_.when == "mid" || f_.when == "ag") {
      auto spinUntil = Clock::now() + std::chrono::milliseconds(2);
      while (f_.when == "mid" ? landedSamples() == 0 : !landed(out_, ownFirst)) {
        if (finished_.load() || Clock::now() > deadline) {
          printf("fault rank %d iteration %d coll %s when %s: missed (the collective ended before the trigger)\n",
                 rank_, it_, coll_.c_str(), f_.when.c_str());
          return;
        }
        if (Clock::now() > spinUntil) std::this_thread::sleep_for(std::chrono::microseconds(20));
        else __builtin_ia32_pause();
      }
    }
    if (!setAdmin(f_, false)) return;
    downed_ = true;
    auto t0 = Clock::now();
    // Where the collective stood once the device was down.
    bool inPhase;
    std::string state;
    if (f_.when == "mid") {
      int k = landedSamples();
      inPhase = k < total;
      state = std::to_string(k) + " of " + std::to_string(total) + " sampled output elements landed";
    } else if (f_.when == "rs") {
      inPhase = !landed(out_, ownFirst);
      state = inPhase ? "own block not reduced yet" : "own block already reduced";
    } else {
      inPhase = !landed(out_, peerLast);
      state = inPhase ? "own block reduced, peer block pending" : "peer block had already landed";
    }
    f_.hit = inPhase;
    printf("fault rank %d iteration %d coll %s when %s: %s (%s; %s/%s down)\n", rank_, it_, coll_.c_str(),
           f_.when.c_str(), inPhase ? "hit" : "missed", state.c_str(), f_.netns.c_str(), f_.dev.c_str());
    if (!inPhase) return;
    // Did a migration commit here before the phase ended?
    bool migrated = false, ended = false;
    while (!finished_.load() && Clock::now() < deadline) {
      if (!migrated && failoversOf(comm_) > before) migrated = true;
      ended = f_.when == "mid" ? landedSamples() == total : landed(out_, f_.when == "rs" ? ownLast : peerLast);
      if (ended) break;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    printf("fault rank %d iteration %d coll %s when %s: migrated in phase %s (phase ended %.1f ms after the fault)\n",
           rank_, it_, coll_.c_str(), f_.when.c_str(), migrated ? "yes" : "no",
           std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (f_.when != "mid" && !migrated) f_.hit = false;  // it did not test a move within the phase
    if (f_.netns == "@lab") printTimeline(before);
  }

  // A lab cable pull's migration timeline, from the carrier loss this guest read: "timeline rank
  // R signal_ms S resume_ms M source X" (the latest failover this rank started: its first signal,
  // and when the work it held up moved again), or "timeline rank R: no migration" when the
  // collective ended (or failed) without one. Sampled until the collective returns, before the
  // cable is put back and a fail-back overwrites the figures.
  void printTimeline(uint64_t before) {
    recclCommStats_t got{};
    while (!finished_.load()) {
      recclCommStats_t st = statsOf(comm_);
      if (st.failovers > before && st.lastFailoverSignalNs != 0) got = st;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    recclCommStats_t st = statsOf(comm_);
    if (st.failovers > before && st.lastFailoverSignalNs != 0) got = st;
    if (got.lastFailoverSignalNs == 0) {
      printf("timeline rank %d: no migration\n", rank_);
      return;
    }
    auto msAfter = [&](uint64_t ns) {
      return ns == 0 ? -1.0 : (static_cast<double>(ns) - static_cast<double>(monoNs(f_.carrierDownAt))) / 1e6;
    };
    printf("timeline rank %d signal_ms %.1f resume_ms %.1f source %s\n", rank_, msAfter(got.lastFailoverSignalNs),
           msAfter(got.lastMigrationResumeNs), got.faultSourceName);
  }

  Fault& f_;
  recclComm_t comm_;
  int rank_, it_;
  std::string coll_;
  const std::vector<float>& out_;
  std::vector<size_t> samples_;
  std::atomic<bool> finished_{false};
  bool downed_ = false;
  std::thread thread_;
};

std::vector<size_t> samplesFor(const std::string& coll, int rank, int n, size_t outCount) {
  size_t per = outCount / static_cast<size_t>(n);
  bool ownCopied = coll == "allgather" || coll == "alltoall";
  std::vector<size_t> s;
  for (int k = 0; k < 16; ++k) {
    size_t i = outCount * static_cast<size_t>(k) / 16;
    if (ownCopied && i / per == static_cast<size_t>(rank)) continue;
    s.push_back(i);
  }
  if (!ownCopied || outCount - 1 < static_cast<size_t>(rank) * per || outCount - 1 >= (rank + 1) * per)
    s.push_back(outCount - 1);
  return s;
}


// What a run did so far, for its last lines.
struct RunCounters {
  int iters = 0;
  Clock::time_point start = Clock::now();
  Clock::time_point failedAt{};
  double maxIterUs = 0;  // the longest iteration (a collective and its checks)
  double callUs = 0;     // the last iteration's collective, from its start until it returned
};

// "<label> rank R iters N secs S failovers F ...": the counters a test adds up over ranks.
void printStats(const char* label, recclComm_t comm, int rank, const RunCounters& run) {
  recclCommStats_t st = statsOf(comm);
  printf("%s rank %d iters %d secs %.2f failovers %llu failbacks %llu resent %llu dup %llu last_us %llu rails_up %u "
         "standby_used %llu max_iter_us %.0f\n",
         label, rank, run.iters, std::chrono::duration<double>(Clock::now() - run.start).count(),
         (unsigned long long)st.failovers, (unsigned long long)st.failbacks, (unsigned long long)st.bytesResent,
         (unsigned long long)st.duplicateSteps, (unsigned long long)st.lastFailoverUs, st.railsUp,
         (unsigned long long)st.standbyFailovers, run.maxIterUs);
  fflush(stdout);
}

// After a collective failed: the communicator is aborted, as an application would, and how long
// that took is printed: an error must leave a communicator that can be torn down at once, with
// nothing left hanging ("aborted rank R: result 0 (no error) in N ms; async error: ..."). Returns `code`.
int abortAfterError(recclComm_t comm, int rank, int code, const RunCounters& run) {
  printf("failed rank %d at_ns %lld call_us %.0f\n", rank, monoNs(run.failedAt), run.callUs);
  printStats("stats", comm, rank, run);
  if (int holdMs = envInt("WORKER_HOLD_FAILED_MS", 0); holdMs > 0) {
    printf("holding failed rank %d for %d ms\n", rank, holdMs);
    fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(holdMs));
  }
  recclResult_t async = recclSuccess;
  recclCommGetAsyncError(comm, &async);
  auto t0 = Clock::now();
  recclResult_t rc = recclCommAbort(comm);
  printf("aborted rank %d: result %d (%s) in %.0f ms; async error: %s\n", rank, static_cast<int>(rc),
         recclGetErrorString(rc), std::chrono::duration<double, std::milli>(Clock::now() - t0).count(),
         recclGetErrorString(async));
  fflush(stdout);
  return code;
}

}  // namespace

double cpuUsNow() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

int cpuRun(recclComm_t comm, int rank, int n, size_t count, int iters) {
  std::vector<float> in(count), out(count);
  for (size_t i = 0; i < count; ++i) in[i] = val(rank, i, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(envInt("WORKER_CPU_SETTLE_MS", 2000)));
  auto call = [&](int it) {
    recclResult_t rc = recclAllReduce(in.data(), out.data(), count, recclFloat32, recclSum, comm, nullptr);
    if (rc != recclSuccess)
      fprintf(stderr, "worker rank %d iteration %d: %s: %s\n", rank, it, recclGetErrorString(rc),
              recclGetLastError(comm));
    return rc;
  };
  for (int w = -2; w < 0; ++w)
    if (recclResult_t rc = call(w); rc != recclSuccess) return 10 + rc;
  double c0 = cpuUsNow();
  auto t0 = Clock::now();
  for (int it = 0; it < iters; ++it)
    if (recclResult_t rc = call(it); rc != recclSuccess) return 10 + rc;
  double wallUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  double cpuUs = cpuUsNow() - c0;
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += val(r, i, 0);
    if (out[i] != want) {
      fprintf(stderr, "worker rank %d: wrong result at %zu\n", rank, i);
      return 1;
    }
  }
  printf("cpu rank %d calls %d cpu_us %.0f wall_us %.0f\n", rank, iters, cpuUs, wallUs);
  recclCommDestroy(comm);
  return 0;
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<Fault> faults;
  if (!parseFaults(getenv("WORKER_FAULTS"), envInt("WORKER_FAULT_RANK", 0), &faults)) return 2;
  struct {
    int iter = -1, ms = 0;
  } pause;
  if (const char* p = getenv("WORKER_PAUSE"); p && sscanf(p, "%d/%d", &pause.iter, &pause.ms) != 2) {
    fprintf(stderr, "worker: WORKER_PAUSE: bad value '%s' (want IT/MS)\n", p);
    return 2;
  }
  recclComm_t comm = nullptr;
  recclResult_t rc = recclCommInitFromEnv(&comm);
  if (rc != recclSuccess) {
    fprintf(stderr, "worker init: %s: %s\n", recclGetErrorString(rc), recclGetLastError(nullptr));
    return 10 + rc;
  }
  int rank = 0, n = 0;
  recclCommUserRank(comm, &rank);
  recclCommCount(comm, &n);
  int iters = envInt("WORKER_ITERS", 200);
  size_t count = getenv("WORKER_COUNT") ? strtoull(getenv("WORKER_COUNT"), nullptr, 10) : (1u << 20);
  std::string coll = getenv("WORKER_COLL") ? getenv("WORKER_COLL") : "allreduce";
  int lateMs = envInt("WORKER_LATE_MS", 300);
  int settleMs = envInt("WORKER_SETTLE_MS", 800);
  int attempts = std::max(1, envInt("WORKER_FAULT_ATTEMPTS", 3));
  int stride = std::max(1, envInt("WORKER_FAULT_STRIDE", coll == "all" ? kNumColls : 1));
  std::map<std::string, int> fds;
  for (auto& f : faults) {
    if (f.rank != rank) continue;
    if (!fds.count(f.netns)) fds[f.netns] = socketIn(f.netns);
    f.fd = fds[f.netns];
    if (f.fd < 0) return 2;
  }
  std::vector<float> in, out, want;
  // Everybody connected before the test injects anything.
  rc = recclBarrier(comm, nullptr);
  if (rc != recclSuccess) {
    fprintf(stderr, "worker rank %d iteration -1: %s: %s\n", rank, recclGetErrorString(rc), recclGetLastError(comm));
    return 10 + rc;
  }
  printf("started rank %d\n", rank);
  if (getenv("WORKER_WAIT_SOURCE")) {
    // Time against the fault source the communicator settles on, not the NIC poll it starts with.
    reccl::bench::waitFaultSourceReady(comm, 60000);
    rc = recclBarrier(comm, nullptr);
    if (rc != recclSuccess) {
      fprintf(stderr, "worker rank %d iteration -1: %s: %s\n", rank, recclGetErrorString(rc), recclGetLastError(comm));
      return 10 + rc;
    }
    printf("settled source rank %d %s\n", rank, statsOf(comm).faultSourceName);
  }
  if (getenv("WORKER_CPU")) return cpuRun(comm, rank, n, count, iters);
  std::this_thread::sleep_for(std::chrono::milliseconds(envInt("WORKER_START_DELAY_MS", 0)));
  RunCounters run;
  const auto& t0 = run.start;
  const int progressMs = envInt("WORKER_PROGRESS_MS", 0);
  uint32_t railsShown = 0;
  Clock::time_point shownAt{};
  double runFor = getenv("WORKER_SECONDS") ? atof(getenv("WORKER_SECONDS")) : 0;
  if (runFor > 0) iters = 1 << 30;
  const char* stopFile = getenv("WORKER_STOP_FILE");
  const int minIters = envInt("WORKER_MIN_ITERS", 0);
  // WORKER_TIMELINE=1: rank 0 prints each iteration's end (CLOCK_REALTIME ns) and duration, for
  // stall measurements against an injector's timestamp.
  bool timeline = getenv("WORKER_TIMELINE") && rank == 0;
  int it = 0;
  for (; it < iters; ++it) {
    std::string c = coll == "all" ? kColls[it % kNumColls] : coll;
    // A fault (attempt) planned for this iteration?
    Fault* fault = nullptr;
    // This rank's own fault of the iteration first (several ranks may inject in one iteration).
    for (auto& f : faults)
      for (int a = 0; a < attempts; ++a)
        if (it == f.iter + a * stride && !(rank == f.rank && f.hit) && (!fault || (fault->rank != rank && f.rank == rank)))
          fault = &f;
    if (fault && (fault->when == "rs" || fault->when == "ag")) {
      // Phase faults: who enters late decides which phase the injecting rank waits in.
      bool late = fault->when == "rs" ? rank != fault->rank : rank == fault->rank;
      if (late) std::this_thread::sleep_for(std::chrono::milliseconds(lateMs));
    }
    if (pause.ms > 0 && pause.iter == it) {
      printf("pausing rank %d before iteration %d for %d ms\n", rank, it, pause.ms);
      fflush(stdout);
      std::this_thread::sleep_for(std::chrono::milliseconds(pause.ms));
    }
    Shape sh = shapeOf(c, n, count);
    out.assign(sh.outCount, kSentinel);
    auto s0 = Clock::now();
    int r;
    bool downed = false;
    {
      std::unique_ptr<Trigger> trig;
      if (fault && rank == fault->rank)
        trig = std::make_unique<Trigger>(*fault, comm, rank, it, c, out, samplesFor(c, rank, n, sh.outCount));
      r = runOne(c, comm, rank, n, count, it, in, out, want);
      run.callUs = std::chrono::duration<double, std::micro>(Clock::now() - s0).count();
      if (trig) downed = trig->downed();
    }
    if (downed) {
      // Back up, and time for the detector's hold-down and the fail-back migrations.
      if (!setAdmin(*fault, true)) return 2;
      std::this_thread::sleep_for(std::chrono::milliseconds(settleMs));
    }
    run.iters = it;
    run.maxIterUs = std::max(run.maxIterUs, std::chrono::duration<double, std::micro>(Clock::now() - s0).count());
    if (r != 0) {
      run.failedAt = Clock::now();
      return abortAfterError(comm, rank, r, run);
    }
    if (progressMs > 0) {
      uint32_t rails = statsOf(comm).railsUp;
      if (rails != railsShown || Clock::now() - shownAt >= std::chrono::milliseconds(progressMs)) {
        shownAt = Clock::now();
        railsShown = rails;
        printf("progress rank %d iters %d rails %u at_ns %lld\n", rank, it + 1, rails, monoNs(shownAt));
      }
    }
    if (timeline) {
      timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      printf("iter %d end_ns %lld dur_us %.0f\n", it, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec,
             std::chrono::duration<double>(Clock::now() - s0).count() * 1e6);
    }
    if (rank == 0 && minIters > 0 && it + 1 == minIters) {
      printf("min iters reached\n");
      fflush(stdout);
    }
    if (runFor > 0) {
      int32_t stop = rank == 0 && std::chrono::duration<double>(Clock::now() - t0).count() > runFor &&
                     it + 1 >= minIters && (!stopFile || access(stopFile, F_OK) == 0);
      rc = recclAllReduce(&stop, &stop, 1, recclInt32, recclMax, comm, nullptr);
      if (rc != recclSuccess) {
        run.failedAt = Clock::now();
        fprintf(stderr, "worker rank %d iteration %d: %s: %s\n", rank, it, recclGetErrorString(rc),
                recclGetLastError(comm));
        return abortAfterError(comm, rank, 10 + rc, run);
      }
      if (stop) {
        ++it;
        break;
      }
    }
  }
  run.iters = it;
  printStats("done", comm, rank, run);
  recclCommStats_t st = statsOf(comm);
  printf("source rank %d %s %s\n", rank, recclGetFaultSourceString(static_cast<recclFaultSource_t>(st.faultSource)),
         st.faultSourceName);
  // WORKER_RELAY_STATS=1: the relay counters too (relay_testbed_test).
  if (getenv("WORKER_RELAY_STATS"))
    printf("relay rank %d migrations %llu forwarded %llu pipes %llu\n", rank, (unsigned long long)st.relayMigrations,
           (unsigned long long)st.relayBytesForwarded, (unsigned long long)st.relayPipesServed);
  const auto destroyAt = Clock::now();
  rc = recclCommDestroy(comm);
  const long long destroyUs =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - destroyAt).count();
  printf("destroyed rank %d destroy_us %lld rc %d\n", rank, destroyUs, static_cast<int>(rc));
  if (rc != recclSuccess) {
    fprintf(stderr, "worker rank %d: recclCommDestroy: %s: %s\n", rank, recclGetErrorString(rc), recclGetLastError(nullptr));
    return 10 + rc;
  }
  return 0;
}
