// Gray failures of RDMA links: a port whose sequence errors (rdma_sysfs.h) cross a count and a
// share of its packets within a sliding window is DEGRADED, the RDMA analog of the TCP
// retransmit rule (docs/detector.md, "Gray failures on RDMA ports").
//
// RoCE traffic is UDP below the NIC's transport, so no TCP tracepoint sees its losses, and on a
// NIC the retransmissions never reach the kernel: the port's counters are what the kernel can
// tell. Each sequence error is one loss episode (a responder NAKs a gap once and drops the
// packets behind it until the resend), so a few in a short window already mean a lossy link;
// a healthy lossless fabric shows none. The judgement (RdmaLossJudge) is pure and table-tested;
// the source (RdmaLossSource) samples the watched ports' counters on a timer, on its own thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "reccl/detector/link_signal.h"
#include "reccl/detector/rdma_sysfs.h"

namespace reccl::detector {

inline constexpr uint32_t kRdmaLossPoolMax = 16;  // RECCL_RDMA_LOSS_POOL's bound

struct RdmaLossParams {
  uint64_t windowNs = 1'000'000'000;  // sliding window; 0: the source is off
  uint32_t threshold = 3;             // sequence errors in the window
  uint32_t ratePpm = 100;             // and per million packets of the port in it; 0: the count alone
  // Under the count in the window, the last poolWindows windows together, by the same count and
  // share (0 or 1: the window alone; never without the share, nor on a port counting no packets).
  uint32_t poolWindows = 4;
  uint64_t relistNs = 5'000'000'000;  // the ports are listed again this often (devices come and go)
};

// How often the counters are read: a tenth of the window, within 10..100 ms.
uint64_t rdmaLossSampleNs(const RdmaLossParams& p) noexcept;

class RdmaLossJudge {
 public:
  // At most one verdict per port this often, as the retransmit program's DEGRADED: a lasting
  // loss keeps the link degraded with one a second (RECCL_DEGRADED_CLEAR_MS is far longer).
  static constexpr uint64_t kMinIntervalNs = 1'000'000'000;
  struct Verdict {
    uint32_t errors = 0;  // sequence errors in the window (or the pool)
    uint32_t ppm = 0;     // per million packets in it (0: packets not counted)
    bool pooled = false;  // judged over the pool's windows
  };
  explicit RdmaLossJudge(RdmaLossParams p) : p_(p) {}
  // The port's counter totals at nowNs (packets: nullopt when the port counts none). A verdict
  // uses its evidence up: the next one rests on samples after it; one held back by
  // kMinIntervalNs keeps it. Totals that went back (a device reset) start over.
  // The pool is for thin flows: a lost tail waits for the QP's timeout before its resend, so a
  // slow flow on a lossy link shows about one error per timeout and never reaches the count in
  // one window. The share keeps the pool off busy links: a window under the count whose packets
  // number at least threshold / share already has a share under the limit.
  std::optional<Verdict> feed(uint64_t nowNs, uint64_t errors, std::optional<uint64_t> packets);

 private:
  struct Sample {
    uint64_t ns;
    uint64_t errors;
    std::optional<uint64_t> packets;
  };
  RdmaLossParams p_;
  std::optional<Verdict> judge(const Sample& base, const Sample& now, bool pooled) const;
  std::deque<Sample> window_;  // oldest first, as far back as the pool; the front is the pool's base
  uint64_t lastVerdictNs_ = 0;
  bool declared_ = false;
};

// What was last read of one port (for status and metrics): totals as the kernel counts them.
struct RdmaPortReport {
  std::string dev;     // "rxe0", "mlx5_2"
  uint32_t port = 0;
  std::string netdev;
  uint64_t sequenceErrors = 0;
  std::optional<uint64_t> packets;  // sent + received; none when the port counts none
  uint64_t verdicts = 0;            // DEGRADED signals this source produced for the port
};

// The sampling runs on a thread of its own: a counter read may be a firmware command (mlx5),
// which must not hold up the thread that reports link losses (the detector's, or the library's
// monitor thread when the detector runs in-process). Signals wait in a queue behind an eventfd.
class RdmaLossSource {
 public:
  // Starts the sampling thread over `root`'s ports (listed again every few seconds: a device
  // created later is read too). kUnsupported when `root` does not exist (no RDMA stack).
  static Result<std::unique_ptr<RdmaLossSource>> open(const std::string& root, uint32_t ownNetnsIno,
                                                      RdmaLossParams params);
  ~RdmaLossSource();
  RdmaLossSource(const RdmaLossSource&) = delete;
  RdmaLossSource& operator=(const RdmaLossSource&) = delete;

  // Readable while signals wait for take().
  int fd() const noexcept { return ready_.get(); }
  // The links whose ports are read: the detector's watches in its own namespace (a port is
  // matched to its netdev by name there). Thread-safe.
  void setWatched(std::set<LinkKey> keys);
  // Moves the DEGRADED signals the sampling produced into `out`.
  void take(std::vector<LinkSignal>& out);
  // "rxe0/1 (eth1)" per port with sequence counters, as last listed.
  std::vector<std::string> ports() const;
  // The ports read at least once (watched ones), as last read.
  std::vector<RdmaPortReport> reports() const;

 private:
  struct Port {
    RdmaPortCounters counters;
    RdmaLossJudge judge;
    std::optional<RdmaPortReport> last;  // as last read
  };
  RdmaLossSource(std::string root, uint32_t ownNetnsIno, RdmaLossParams params)
      : root_(std::move(root)), netnsIno_(ownNetnsIno), params_(params) {}
  void run();
  void relist();
  void sample(uint64_t nowNs);

  const std::string root_;
  const uint32_t netnsIno_;
  const RdmaLossParams params_;
  std::vector<Port> ports_;  // the sampling thread's
  UniqueFd timer_;
  UniqueFd ready_;
  UniqueFd stop_;
  std::thread thread_;
  mutable std::mutex mu_;  // guards the three below
  std::set<LinkKey> watched_;
  std::vector<LinkSignal> pending_;
  std::vector<std::string> portNames_;
  std::vector<RdmaPortReport> reports_;
};

}  // namespace reccl::detector
