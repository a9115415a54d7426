// The kernel side of the detector: opens the link_detector skeleton, probes every hook alone
// (this kernel may refuse trampolines, lack a tracepoint or RDMA), loads and attaches the ones
// that work, and owns the programs, links, ring buffer and the mmapped link-state array.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/detector/link_signal.h"

struct link_detector;
struct ring_buffer;
struct bpf_link;

namespace reccl::detector {

struct BpfOptions {
  std::set<LinkSource> sources;  // hooks to use; empty: every hook this kernel accepts
  uint32_t ringBytes = 256 * 1024;
  uint32_t retransThreshold = 12;
  uint64_t retransWindowNs = 500'000'000;
  // And the window's retransmitted segments per million segments sent by the retransmitting
  // sockets must reach this (a healthy saturated link retransmits too); 0: the count alone.
  uint32_t retransRatePpm = 3000;
  // Closed windows pooled when a window stays under the count (thin links, rate check on; see
  // docs/detector.md, "Gray failures"); 0: off, at most RECCL_RETRANS_POOL_MAX.
  uint32_t retransPoolWindows = RECCL_RETRANS_POOL_MAX;
  uint64_t degradedMinIntervalNs = 1'000'000'000;
  bool reportUnattributed = false;
  bool reportRdma = true;
  // Period of the in-kernel re-read of the watched devices while link-watch may hold a carrier
  // change (from a queueing of its work until that run ends, and for a second after it while a
  // device is non-urgent: docs/detector.md, "Link-watch's blind second"); 0 disables.
  uint64_t scanPeriodNs = 100'000;
};

// One link's retransmit window as the kernel side sums it (the rate check's inputs).
struct RetransWindowStats {
  uint64_t retransmits = 0;      // counted since the link was watched (every window)
  uint64_t windowRetransmits = 0;
  uint64_t windowRetransSegs = 0;
  uint64_t windowSentSegs = 0;
  uint64_t lastRetransmits = 0;  // the previous window
  uint64_t lastRetransSegs = 0;
  uint64_t lastSentSegs = 0;
  uint64_t windowDsackSegs = 0;  // retransmitted segments the receivers reported as duplicates
  uint64_t lastDsackSegs = 0;
  uint64_t heldByRate = 0;       // retransmits over the count threshold the rate held back
  uint64_t failedAttempts = 0;   // retransmit attempts that sent nothing (not counted)
};

struct HookStatus {
  std::string program;  // program name in link_detector.bpf.c
  LinkSource source = RECCL_LINK_SRC_NONE;
  bool active = false;
  std::string reason;   // why not active ("" when active)
};

struct BpfCounters {
  uint64_t ringbufDrops = 0;  // records lost in the kernel: ring full
  uint64_t events = 0;        // records submitted by programs
  uint64_t consumed = 0;      // records read by userspace
  uint64_t abiRejects = 0;    // records of a foreign ABI version or size
  uint64_t dqlStalls = 0;
  uint64_t scanRuns = 0;      // link-watch scan timer firings
  uint64_t hookHits[RECCL_LINK_SRC_COUNT] = {};
};

class BpfSource {
 public:
  using RecordHandler = std::function<void(const reccl_link_event&)>;

  // Probes, loads and attaches. kPermission without CAP_BPF/CAP_PERFMON, kUnsupported when no
  // hook attaches here (the statuses say why per hook).
  static Result<std::unique_ptr<BpfSource>> open(const BpfOptions& opts, RecordHandler handler);
  // Probes each hook alone without keeping anything loaded: what `open` would activate.
  static std::vector<HookStatus> probe(const BpfOptions& opts);
  ~BpfSource();
  BpfSource(const BpfSource&) = delete;
  BpfSource& operator=(const BpfSource&) = delete;

  const std::vector<HookStatus>& hooks() const { return hooks_; }
  // Skeleton loads open() made, probes included (each parses the kernel's BTF): the trampoline
  // probes plus one when the hooks loaded together.
  int openLoads() const { return openLoads_; }
  std::set<LinkSource> activeSources() const;

  int epollFd() const;  // readable when records wait
  // Reads every waiting record into the handler; returns how many.
  int consume();

  Status watch(LinkKey key, uint32_t slot);
  Status unwatch(LinkKey key);
  void setWatchCount(uint32_t n);
  void setSlotCount(uint32_t n);  // highest slot in use + 1
  // Whether link-watch handles the slot's carrier changes as urgent (RtnlLinkInfo::
  // linkwatchUrgent): the in-kernel scan then ends with link-watch's run instead of covering
  // the second after it. Unknown: false.
  void setLinkwatchUrgent(uint32_t slot, bool urgent);
  bool linkwatchUrgent(uint32_t slot) const;  // as the program sees it
  // Remembers the kernel addresses of the watched devices of one namespace (a thread enters
  // it and runs the resolve_devices program), so the link-watch hook reads their state in the
  // kernel. Returns how many were found; kUnsupported without that program.
  Result<uint32_t> resolveDevices(int netnsFd, uint32_t netnsIno);
  void forgetDevice(uint32_t slot);
  bool canResolve() const { return resolveFd_ >= 0; }

  // The BPF_F_MMAPABLE array, mapped read-write in this process (programs and the detector
  // both update it with atomics).
  reccl_link_slot* slots() const { return slots_; }
  int linkStateMapFd() const;
  // A new fd of the link-state map for another process to mmap PROT_READ.
  Result<int> linkStateShareFd() const;
  BpfCounters counters() const;
  // The kernel side's retransmit window of a slot (the slot's own counters included).
  RetransWindowStats retransWindow(uint32_t slot) const;

 private:
  BpfSource() = default;
  // Loads the active hooks_ (and the device resolver) into skel_ and attaches them; unload()
  // undoes a partial load.
  Status loadActive(const BpfOptions& opts, bool resolver);
  void unload();
  static int onRingRecord(void* ctx, void* data, size_t size);
  link_detector* skel_ = nullptr;
  std::vector<bpf_link*> links_;
  ring_buffer* ring_ = nullptr;
  reccl_link_slot* slots_ = nullptr;
  size_t slotsBytes_ = 0;
  std::vector<HookStatus> hooks_;
  RecordHandler handler_;
  uint64_t consumed_ = 0;
  uint64_t abiRejects_ = 0;
  int resolveFd_ = -1;
  int openLoads_ = 0;
};

// Address of a kernel symbol from /proc/kallsyms; 0 when absent or hidden (kptr_restrict).
uint64_t kallsymsAddress(const char* name);

}  // namespace reccl::detector
