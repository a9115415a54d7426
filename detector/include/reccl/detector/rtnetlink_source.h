// rtnetlink listener (RTMGRP_LINK) for one network namespace: the source that needs no BPF and
// no privilege in the caller's own namespace, and the detector's source of link-up when no
// BPF hook reports it. Turns link messages of watched devices into signals on a change of
// usability (admin up with carrier).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/detector/link_signal.h"
#include "reccl/detector/rtnl_link.h"

namespace reccl::detector {

class RtnetlinkSource {
 public:
  // netnsFd < 0: the caller's own namespace.
  static Result<std::unique_ptr<RtnetlinkSource>> open(int netnsFd, uint32_t netnsIno);

  int fd() const;
  uint32_t netnsIno() const { return netnsIno_; }
  void watch(const RtnlLinkInfo& current);
  void unwatch(uint32_t ifindex);
  // Reads every waiting message (non-blocking); appends signals for watched devices. On a
  // receive-queue overrun (ENOBUFS) the watched devices are re-read so no change is lost.
  Status drain(uint64_t nowNs, std::vector<LinkSignal>& out);
  uint64_t overruns() const { return overruns_; }
  // Watched devices whose link-watch class (RtnlLinkInfo::linkwatchUrgent) changed in the
  // messages drained since the last call: a veth peer that moved to another namespace and took
  // another ifindex there.
  struct UrgencyChange {
    uint32_t ifindex = 0;
    bool urgent = false;
  };
  std::vector<UrgencyChange> takeUrgencyChanges() { return std::exchange(urgencyChanges_, {}); }
  uint64_t messages() const { return messages_; }

 private:
  struct View {
    std::string ifname;
    bool adminUp = false;
    bool carrier = false;
    uint32_t downs = 0;
    bool haveDowns = false;
    bool urgent = false;
  };
  void apply(const RtnlLinkInfo& info, uint64_t nowNs, std::vector<LinkSignal>& out);

  MnlSocketPtr sock_;
  std::unique_ptr<RtnlLinkQuery> query_;
  uint32_t netnsIno_ = 0;
  std::unordered_map<uint32_t, View> views_;
  uint64_t overruns_ = 0;
  uint64_t messages_ = 0;
  std::vector<UrgencyChange> urgencyChanges_;
};

}  // namespace reccl::detector
