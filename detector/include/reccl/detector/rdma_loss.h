// Gray failures of RDMA links: a port whose sequence errors (rdma_sysfs.h) cross a count and a
// share of its packets within a sliding window is DEGRADED, the RDMA analog of the TCP
// retransmit rule (docs/detector.md, "Gray failures on RDMA ports").
//
// RoCE traffic is UDP below the NIC's transport, so no TCP tracepoint sees its losses, and on a
// NIC the retransmissions never reach the kernel: the port's counters are what the kernel can
// tell. Each sequence error is one loss episode (a responder NAKs a gap once and drops the
// packets behind it until the resend), so a few in a short window already mean a lossy link;
// a healthy lossless fabric shows none. The judgement (RdmaLossJudge) is pure and table-tested;
// the source (RdmaLossSource) samples the watched ports' counters on a timer.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "reccl/detector/link_signal.h"
#include "reccl/detector/rdma_sysfs.h"

namespace reccl::detector {

struct RdmaLossParams {
  uint64_t windowNs = 1'000'000'000;  // sliding window; 0: the source is off
  uint32_t threshold = 3;           // sequence errors in the window
  uint32_t ratePpm = 100;           // and per million packets of the port in it; 0: the count alone
};

// How often the counters are read: a tenth of the window, within 10..100 ms.
uint64_t rdmaLossSampleNs(const RdmaLossParams& p) noexcept;

class RdmaLossJudge {
 public:
  struct Verdict {
    uint32_t errors = 0;  // sequence errors in the window
    uint32_t ppm = 0;     // per million packets in it (0: packets not counted)
  };
  explicit RdmaLossJudge(RdmaLossParams p) : p_(p) {}
  // The port's counter totals at nowNs (packets: nullopt when the port counts none). A verdict
  // uses its evidence up: the next one rests on samples after it. Totals that went back (a
  // device reset) start over.
  std::optional<Verdict> feed(uint64_t nowNs, uint64_t errors, std::optional<uint64_t> packets);

 private:
  struct Sample {
    uint64_t ns;
    uint64_t errors;
    std::optional<uint64_t> packets;
  };
  RdmaLossParams p_;
  std::deque<Sample> window_;  // oldest first; the front is the window's base
};

class RdmaLossSource {
 public:
  // The ports under `root` bound to a netdev with sequence-error counters. kUnsupported when
  // there is none (no RDMA device, or a driver that does not count them).
  static Result<std::unique_ptr<RdmaLossSource>> open(const std::string& root, uint32_t ownNetnsIno,
                                                      RdmaLossParams params);
  // A periodic timer (rdmaLossSampleNs): readable when a sample is due.
  int fd() const noexcept { return timer_.get(); }
  // Reads the timer and the counters of the ports whose link `watched` says is watched here;
  // appends a DEGRADED signal for each port the judge declares.
  void sample(uint64_t nowNs, const std::function<bool(LinkKey)>& watched, std::vector<LinkSignal>& out);
  // "rxe0/1 (eth1)" per port.
  std::vector<std::string> ports() const;

 private:
  struct Port {
    RdmaPortCounters counters;
    RdmaLossJudge judge;
  };
  RdmaLossSource() = default;
  std::vector<Port> ports_;
  UniqueFd timer_;
  uint32_t netnsIno_ = 0;
};

}  // namespace reccl::detector
