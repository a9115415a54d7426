// reccl-detectord: the node daemon. Loads the link detector once and serves every local job.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "detector_daemon.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"

int main(int argc, char** argv) {
  using namespace reccl::detector;
  CLI::App app{"reccl-detectord: kernel link-fault detector for every reccl job on this node"};
  app.footer(
      "EXAMPLES:\n"
      "  reccl-detectord                                   # defaults, metrics on 127.0.0.1:9464\n"
      "  reccl-detectord --group reccl --metrics-port 9470\n"
      "  reccl-detectord --metrics-addr :: --metrics-port 9464   # scraped from other hosts\n"
      "  reccl-detectord --source netlink --watch tb1-h0:rail0\n\n"
      "Logs are JSON lines on stdout. Exit: 0 after SIGTERM/SIGINT, 1 failed, 64 usage,\n"
      "77 when no source can work here. Protocol, metrics and the systemd unit: docs/detector.md.");
  DaemonOptions opts;
  opts.detector = DetectorOptions::fromEnv();
  opts.socketPath = reccl::params::DetectordSocket();
  opts.group = reccl::params::DetectordGroup();
  std::string source = sourceModeName(opts.detector.mode);
  std::vector<std::string> watch;
  int64_t holdDownMs = static_cast<int64_t>(opts.detector.stateMachine.holdDownNs / 1000000);
  bool verbose = false;
  opts.detector.realtimePriority = 10;
  app.add_option("--socket", opts.socketPath, "unix socket clients connect to")->capture_default_str();
  app.add_option("--group", opts.group, "group allowed to connect besides root (socket mode 0660)");
  int metricsPort = opts.metricsServer.port;
  app.add_option("--metrics-port", metricsPort, "Prometheus /metrics on ADDR:PORT; 0 any free port, -1 off")
      ->capture_default_str();
  app.add_option("--metrics-addr", opts.metricsServer.address, "address /metrics listens on (IPv4 or IPv6 literal)")
      ->capture_default_str();
  app.add_option("--max-watches-per-client", opts.limits.maxWatches, "links one client may watch at once")
      ->capture_default_str();
  app.add_option("--max-requests-per-sec", opts.limits.requestsPerSec,
                 "a client sending more (after a burst of twice as many) is disconnected")
      ->capture_default_str();
  app.add_option("--max-clients-per-uid", opts.limits.maxClientsPerUid, "connections one user may hold at once")
      ->capture_default_str();
  app.add_option("--max-clients", opts.limits.maxClients, "connections at once, all users")->capture_default_str();
  app.add_option("--source", source, "auto, bpf or netlink")->capture_default_str();
  app.add_option("--watch", watch, "links watched from the start: [NETNS:]IF");
  app.add_option("--rdma-sysfs", opts.detector.rdmaSysfs,
                 "the RDMA devices' sysfs directory, where the host's is mounted elsewhere (a container)")
      ->capture_default_str();
  app.add_option("--hold-down-ms", holdDownMs, "a link must stay up this long before LinkUp")->capture_default_str();
  app.add_option("--rt-priority", opts.detector.realtimePriority, "SCHED_FIFO priority of the detector thread, 0 off (needs CAP_SYS_NICE or RLIMIT_RTPRIO >= it: the unit sets LimitRTPRIO)")
      ->capture_default_str();
  app.add_flag("-v,--verbose", verbose, "log at INFO level");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code() == 0 ? app.exit(e) : (app.exit(e), 64);
  }
  // The parameter table's check, as at a communicator's init: an invalid RECCL_* value (the
  // defaults above met it and fell back) is named and refused.
  if (reccl::Status s = reccl::params::validateAll(); !s.ok()) {
    std::fprintf(stderr, "reccl-detectord: %s\n", s.message().c_str());
    return 64;
  }
  // Our logs as JSON lines on stdout, like the daemon's own records.
  reccl::logSetSink([](reccl::LogLevel lvl, std::string_view line) {
    nlohmann::json j{{"level", lvl == reccl::LogLevel::kWarn ? "warn" : "info"}, {"msg", std::string(line)}};
    std::string s = j.dump() + "\n";
    (void)!write(STDOUT_FILENO, s.data(), s.size());
  });
  if (verbose) {
    setenv("RECCL_DEBUG", "INFO", 0);
    reccl::logReloadEnv();
  }
  reccl::logCaptureLibbpf();
  auto mode = parseSourceMode(source);
  if (!mode.ok()) {
    std::fprintf(stderr, "reccl-detectord: %s\n", mode.status().message().c_str());
    return 64;
  }
  opts.detector.mode = mode.value();
  if (metricsPort < -1 || metricsPort > 65535) {
    std::fprintf(stderr, "reccl-detectord: metrics-port: must be -1..65535\n");
    return 64;
  }
  opts.metrics = metricsPort >= 0;
  opts.metricsServer.port = metricsPort < 0 ? 0 : metricsPort;
  opts.limits.requestBurst = 2 * opts.limits.requestsPerSec;
  if (holdDownMs < 0) {
    std::fprintf(stderr, "reccl-detectord: hold-down-ms: must be >= 0\n");
    return 64;
  }
  opts.detector.stateMachine.holdDownNs = static_cast<uint64_t>(holdDownMs) * 1000000ull;
  for (const auto& w : watch) {
    auto spec = parseWatchSpec(w);
    if (!spec.ok()) {
      std::fprintf(stderr, "reccl-detectord: %s\n", spec.status().message().c_str());
      return 64;
    }
    opts.detector.watch.push_back(spec.value());
  }
  auto d = DetectorDaemon::create(opts);
  if (!d.ok()) {
    std::fprintf(stderr, "reccl-detectord: %s\n", d.status().ToString().c_str());
    auto code = d.status().code();
    if (code == reccl::Errc::kInvalidArgument) return 64;
    if (code == reccl::Errc::kUnsupported || code == reccl::Errc::kPermission) return 77;
    return 1;
  }
  auto st = d.value()->run();
  if (!st.ok()) {
    std::fprintf(stderr, "reccl-detectord: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
