#include "failover/health/source_choice.h"

namespace reccl::failover {

const char* sourceKindName(SourceKind k) noexcept {
  switch (k) {
    case SourceKind::kDaemon: return "daemon";
    case SourceKind::kInProcess: return "in-process";
    case SourceKind::kPoll: return "nic-poll";
    case SourceKind::kNone: return "none";
  }
  return "?";
}

Result<SourcePlan> planSources(std::string_view mode, bool realNics) {
  SourcePlan p;
  if (mode == "auto") {
    p.order = {SourceKind::kDaemon, SourceKind::kInProcess, SourceKind::kPoll};
    p.inProcessMode = "auto";
    p.retryDaemon = true;
  } else if (mode == "daemon") {
    p.order = {SourceKind::kDaemon, SourceKind::kPoll};
    p.retryDaemon = true;
  } else if (mode == "bpf") {
    p.order = {SourceKind::kInProcess, SourceKind::kPoll};
    p.inProcessMode = "bpf";
  } else if (mode == "netlink" || mode == "rtnetlink") {
    p.order = {SourceKind::kInProcess, SourceKind::kPoll};
    p.inProcessMode = "netlink";
  } else if (mode == "poll") {
    p.order = {SourceKind::kPoll};
  } else if (mode == "none") {
    p.order = {SourceKind::kNone};
  } else {
    return Status(Errc::kInvalidArgument, "RECCL_DETECTOR: expected auto, daemon, bpf, netlink, poll or none, got '" +
                                              std::string(mode) + "'");
  }
  // Loopback rails (single-host runs) have no link to watch.
  if (!realNics) p = SourcePlan{{SourceKind::kNone}, "", false};
  return p;
}

}  // namespace reccl::failover
