// `reccl detector watch` runs the detector in this process and prints link events as they
// happen; `reccl detector status` asks the node daemon.
#include <signal.h>
#include <sys/signalfd.h>
#include <poll.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>

#include "command.h"
#include "reccl/cli/finite_number.h"
#include "reccl/common/deadline.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"
#include "reccl/detector/daemon_protocol.h"
#include "reccl/detector/detector.h"
#include "reccl/detector/detector_client.h"
#include "reccl/detector/netns.h"
#include "reccl/detector/rtnl_link.h"

namespace reccl::cli {
namespace {

using namespace reccl::detector;

int exitFor(const Status& st) {
  switch (st.code()) {
    case Errc::kInvalidArgument:
    case Errc::kNotFound:
      return kExitUsage;
    case Errc::kPermission:
    case Errc::kUnsupported:
      return kExitUnsupported;
    default:
      return kExitFailed;
  }
}

struct WatchArgs {
  bool json = false;
  std::string netns;
  std::vector<std::string> devs;
  std::string source = "auto";
  int64_t holdDownMs = -1;
  double durationS = 0;
  int64_t count = 0;
  bool signals = false;
};

// One raw signal as a source produced it, before the state machine folds it into link events
// (`watch --signals`): the RDMA port events (fentry on ib_dispatch_event, the verbs async
// events) show here even when the carrier hook took the link down first.
void printSignal(const LinkSignal& s, uint64_t recvNs, bool json) {
  if (json) {
    nlohmann::json j{{"op", "signal"},     {"kind", kindName(s.kind)}, {"source", sourceName(s.source)},
                     {"ifname", s.ifname}, {"netns_ino", s.link.netnsIno}, {"ifindex", s.link.ifindex},
                     {"value", s.value},   {"ts_ns", s.tsNs},           {"recv_ns", recvNs}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    double latUs = recvNs >= s.tsNs && s.tsNs ? (recvNs - s.tsNs) / 1e3 : 0;
    std::printf("%-13s %s (ifindex %u) kind=%s source=%s value=%" PRIu64 " delivered=%.1fus\n", "signal",
                s.ifname.c_str(), s.link.ifindex, kindName(s.kind), sourceName(s.source), s.value, latUs);
  }
  std::fflush(stdout);
}

// Every device of the namespace except loopback.
Result<std::vector<std::string>> allDevices(const std::string& netns) {
  RECCL_ASSIGN_OR_RETURN(Netns ns, openNetns(netns));
  RECCL_ASSIGN_OR_RETURN(auto q, RtnlLinkQuery::open(ns.fd.valid() ? ns.fd.get() : -1));
  RECCL_ASSIGN_OR_RETURN(auto links, q.all());
  std::vector<std::string> names;
  for (const auto& l : links)
    if (l.ifname != "lo") names.push_back(l.ifname);
  return names;
}

// The parameter table's check, as at a communicator's init: an invalid RECCL_* value is named
// and refused (usage exit), never replaced by its default. 0 when every value is valid.
int refuseInvalidParams(const char* cmd) {
  Status s = params::validateAll();
  if (s.ok()) return 0;
  std::fprintf(stderr, "reccl detector %s: %s\n", cmd, s.message().c_str());
  return kExitUsage;
}

int runWatch(const WatchArgs& a) {
  if (int rc = refuseInvalidParams("watch")) return rc;
  auto opts = DetectorOptions::fromEnv();
  auto mode = parseSourceMode(a.source);
  if (!mode.ok()) {
    std::fprintf(stderr, "reccl detector watch: %s\n", mode.status().message().c_str());
    return kExitUsage;
  }
  opts.mode = mode.value();
  if (a.holdDownMs >= 0) opts.stateMachine.holdDownNs = static_cast<uint64_t>(a.holdDownMs) * 1000000ull;
  std::vector<std::string> devs = a.devs;
  if (devs.empty()) {
    auto all = allDevices(a.netns);
    if (!all.ok()) {
      std::fprintf(stderr, "reccl detector watch: %s\n", all.status().message().c_str());
      return exitFor(all.status());
    }
    devs = all.value();
    if (devs.empty()) {
      std::fprintf(stderr, "reccl detector watch: netns: no devices besides lo in '%s'\n", a.netns.c_str());
      return kExitUsage;
    }
  }
  for (const auto& d : devs) {
    auto spec = parseWatchSpec(a.netns.empty() ? d : a.netns + ":" + d);
    if (!spec.ok()) {
      std::fprintf(stderr, "reccl detector watch: %s\n", spec.status().message().c_str());
      return kExitUsage;
    }
    opts.watch.push_back(spec.value());
  }
  logCaptureLibbpf();
  auto det = Detector::create(opts);
  if (!det.ok()) {
    std::fprintf(stderr, "reccl detector watch: %s\n", det.status().message().c_str());
    return exitFor(det.status());
  }
  Detector& d = *det.value();

  // The signal observer prints from the detector's thread, the events from this one.
  std::mutex outMu;
  if (a.signals)
    d.setSignalObserver([&outMu, json = a.json](const LinkSignal& s, uint64_t recvNs) {
      std::lock_guard lk(outMu);
      printSignal(s, recvNs, json);
    });
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  int sfd = signalfd(-1, &set, SFD_CLOEXEC);
  if (Status s = d.start(); !s.ok()) {
    std::fprintf(stderr, "reccl detector watch: %s\n", s.message().c_str());
    return kExitFailed;
  }
  // Printed once the sources run, so a script may read it as "watching now": a fault injected
  // after this line is reported.
  auto st = d.status();
  std::string active;
  for (const auto& s : st.sources)
    if (s.active) active += (active.empty() ? "" : ",") + s.name;
  std::fprintf(stderr, "reccl detector: mode %s; active sources: %s; watching %zu links\n",
               st.mode.c_str(), active.c_str(), st.links.size());
  if (!d.bpfActive() && opts.mode != SourceMode::kNetlink)
    for (const auto& s : st.sources)
      if (s.name == "bpf") std::fprintf(stderr, "reccl detector: bpf unavailable: %s\n", s.reason.c_str());
  Deadline end = a.durationS > 0 ? Deadline::after(std::chrono::nanoseconds(static_cast<int64_t>(a.durationS * 1e9)))
                                 : Deadline::never();
  int64_t printed = 0;
  while (a.count <= 0 || printed < a.count) {
    pollfd p[2] = {{d.eventFd(), POLLIN, 0}, {sfd, POLLIN, 0}};
    int r = poll(p, 2, end.remainingMsForPoll());
    if (r == 0 && end.expired()) break;
    if (r < 0) continue;
    if (p[1].revents & POLLIN) break;
    for (const auto& e : d.drain()) {
      if (a.count > 0 && printed >= a.count) break;
      ++printed;
      std::lock_guard lk(outMu);
      if (a.json) {
        std::printf("%s\n", eventToJson(e).c_str());
      } else {
        double latUs = e.signalNs && e.emitNs >= e.signalNs ? (e.emitNs - e.signalNs) / 1e3 : 0;
        std::printf("%-13s %s:%s (ifindex %u) kind=%s source=%s detect=%.1fus flaps=%" PRIu64 " penalty=%.0f\n",
                    linkEventTypeName(e.type), e.netns.empty() ? "(own)" : e.netns.c_str(), e.ifname.c_str(),
                    e.link.ifindex, kindName(e.kind), sourceName(e.source), latUs, e.flaps, e.penalty);
      }
      std::fflush(stdout);
    }
  }
  if (sfd >= 0) close(sfd);
  return kExitOk;
}

// The daemon's status reply as a table.
void printStatus(const nlohmann::json& j) {
  std::printf("mode: %s   clients: %d\nsources:\n", j.value("mode", "").c_str(), j.value("clients", 0));
  for (const auto& src : j.at("sources"))
    std::printf("  %-45s %s %s\n", src.value("name", "").c_str(), src.value("active", false) ? "active  " : "inactive",
                src.value("reason", "").c_str());
  std::printf("links:\n");
  for (const auto& l : j.at("links"))
    std::printf("  %s:%-10s ifindex %-4u slot %-3u %-9s phys=%s suppressed=%s penalty=%.0f flaps=%" PRIu64 " epoch=%" PRIu64 "\n",
                l.value("netns", "").empty() ? "(own)" : l.value("netns", "").c_str(), l.value("ifname", "").c_str(),
                l.value("ifindex", 0u), l.value("slot", 0u), l.value("state", "").c_str(),
                l.value("physical_up", false) ? "up" : "down", l.value("suppressed", false) ? "yes" : "no",
                l.value("penalty", 0.0), l.value("flaps", uint64_t(0)), l.value("epoch", uint64_t(0)));
  if (j.contains("rdma_ports") && !j.at("rdma_ports").empty()) {
    std::printf("rdma ports:\n");
    for (const auto& p : j.at("rdma_ports")) {
      std::string packets = p.contains("packets") ? std::to_string(p.value("packets", uint64_t(0))) : "-";
      std::printf("  %s/%u (%s) sequence errors %" PRIu64 " packets %s degraded %" PRIu64 "\n",
                  p.value("rdma_device", "").c_str(), p.value("port", 0u), p.value("ifname", "").c_str(),
                  p.value("sequence_errors", uint64_t(0)), packets.c_str(), p.value("degraded_verdicts", uint64_t(0)));
    }
  }
  const auto& c2 = j.at("counters");
  std::printf("counters: events %" PRIu64 ", ring-buffer drops %" PRIu64 ", debounced %" PRIu64 ", stale %" PRIu64 "\n",
              c2.value("events", uint64_t(0)), c2.value("ringbuf_drops", uint64_t(0)), c2.value("debounced", uint64_t(0)),
              c2.value("stale", uint64_t(0)));
}

int runStatus(bool json, const std::string& socketPath) {
  auto c = DetectorClient::connect(socketPath);
  if (!c.ok()) {
    std::fprintf(stderr, "reccl detector status: %s\n", c.status().message().c_str());
    return c.status().code() == Errc::kInvalidArgument ? kExitUsage : kExitFailed;
  }
  auto s = c.value()->statusJson();
  if (!s.ok()) {
    std::fprintf(stderr, "reccl detector status: %s\n", s.status().message().c_str());
    return kExitFailed;
  }
  if (json) {
    std::printf("%s\n", s.value().c_str());
    return kExitOk;
  }
  auto j = nlohmann::json::parse(s.value(), nullptr, false);
  if (!j.is_object()) {
    std::fprintf(stderr, "reccl detector status: malformed reply from the daemon\n");
    return kExitFailed;
  }
  // A field of another type than the daemon's own makes the reader throw: a malformed reply too.
  try {
    printStatus(j);
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr, "reccl detector status: malformed reply from the daemon: %s\n", e.what());
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

void addDetectorCommand(CLI::App& root, CommandContext& ctx) {
  auto* cmd = root.add_subcommand("detector", "kernel link-fault detector: watch events, ask the node daemon");
  requireSubcommand(cmd, "detector", ctx);
  cmd->footer(
      "EXAMPLES:\n"
      "  reccl detector watch --netns tb1-h0 --dev rail0 --dev rail1\n"
      "  reccl detector watch --json --source netlink          # every device of this namespace\n"
      "  reccl detector watch --signals --dev rail0           # RDMA port events of rail0's rxe/HCA too\n"
      "  reccl detector status --json");

  static WatchArgs wa;
  auto* watch = cmd->add_subcommand("watch", "run the detector here and print link events as they happen");
  watch->add_flag("--json", wa.json, "one JSON object per event");
  watch->add_option("--netns", wa.netns, "network namespace: name under /run/netns or a path (default: own)");
  watch->add_option("--dev", wa.devs, "device to watch (repeatable; default: every device but lo)");
  watch->add_option("--source", wa.source, "auto (BPF where it loads, else rtnetlink), bpf or netlink")->capture_default_str();
  watch->add_option("--hold-down-ms", wa.holdDownMs, "a link must stay up this long before LinkUp (default RECCL_HOLDDOWN_MS)")
      ->check(CLI::Range(int64_t{0}, int64_t{86'400'000}));
  watch->add_flag("--signals", wa.signals,
                  "also every raw signal as its source produced it (RDMA port events included), before the "
                  "state machine folds them into link events");
  watch->add_option("--duration", wa.durationS, "stop after this many seconds (default: until Ctrl-C)")
      ->check(FiniteNumber)
      ->check(CLI::Range(0.001, 31'536'000.0));  // a year: the deadline's nanoseconds stay within int64
  watch->add_option("--count", wa.count, "stop after printing this many events (default: no limit)")
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
  watch->callback([&ctx] { ctx.exitCode = runWatch(wa); });

  static bool statusJson = false;
  static std::string socketPath;
  auto* status = cmd->add_subcommand("status", "ask reccl-detectord: active sources, watched links, states, drops");
  status->add_flag("--json", statusJson, "print the daemon's JSON reply");
  auto* socketOpt = status->add_option("--socket", socketPath, "daemon socket (default RECCL_DETECTORD_SOCKET)");
  status->callback([&ctx, socketOpt] {
    if ((ctx.exitCode = refuseInvalidParams("status")) != 0) return;
    if (socketOpt->count() > 0 && socketPath.empty()) {
      std::fprintf(stderr, "reccl detector status: --socket: empty path\n");
      ctx.exitCode = kExitUsage;
      return;
    }
    ctx.exitCode = runStatus(statusJson, socketPath.empty() ? reccl::params::DetectordSocket() : socketPath);
  });
}

}  // namespace reccl::cli
