// reccl-detectord's server: one Detector for the node, clients on a SOCK_SEQPACKET unix
// socket, Prometheus metrics over HTTP on their own threads, JSON-lines logs, clean exit on
// SIGTERM/SIGINT (BPF links and programs released with the Detector; nothing is pinned).
//
// Threads: the event loop (run(): accepts, serves requests, delivers events; owns clients_ and
// everything below it), the detector's thread (signals → state machine; reaches the daemon only
// through metrics_ and the Detector's eventfd), and the metrics server's threads (read the
// Detector's status and metrics_, both thread-safe). Nothing a client sends or withholds can
// block the loop: client sockets are non-blocking, each client has limits (client_limits.h), a
// watched namespace comes as a descriptor the client opened itself, and HTTP is not on it.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "client_limits.h"
#include "daemon_metrics.h"
#include "metrics_server.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "reccl/detector/daemon_protocol.h"
#include "reccl/detector/detector.h"

namespace reccl::detector {

struct DaemonOptions {
  std::string socketPath = "/run/reccl/detectord.sock";
  std::string group;   // may connect besides the daemon's user and root; empty: nobody else
  bool metrics = true;
  MetricsServerOptions metricsServer;
  ClientLimits limits;
  DetectorOptions detector;
};

class DetectorDaemon {
 public:
  static Result<std::unique_ptr<DetectorDaemon>> create(DaemonOptions opts);
  ~DetectorDaemon();
  // Serves until SIGTERM or SIGINT (blocked and read through a signalfd).
  Status run();
  int metricsPort() const { return server_ ? server_->port() : -1; }

 private:
  struct Client {
    UniqueFd sock;
    std::set<LinkKey> watches;
    int pid = 0;
    uid_t uid = static_cast<uid_t>(-1);
    RequestBudget budget{1, 1, 0};
  };
  DetectorDaemon() = default;
  Status setupSocket();
  void acceptClients();
  void onClient(int fd);
  // reason: a fixed word for the metric's label; detail: the log line's text.
  void dropClient(int fd, const char* reason, const std::string& detail);
  void handleRequest(Client& c, const DaemonRequest& req, UniqueFd nsFd);
  std::string watchReply(Client& c, const DaemonRequest& req, UniqueFd nsFd);
  void reply(Client& c, const std::string& text, int fd = -1);
  // Stops watching `key` when no client watches it any more (and it was not given on the
  // command line): its slot in the link-state array is free again.
  void releaseWatch(const LinkKey& key);
  void deliverEvents();
  void pauseAccepting(bool pause);

  DaemonOptions opts_;
  std::unique_ptr<Detector> det_;
  std::unique_ptr<DaemonMetrics> metrics_;
  std::unique_ptr<MetricsServer> server_;  // destroyed first: its threads read det_ and metrics_
  UniqueFd epoll_, listen_, signalFd_;
  std::map<int, Client> clients_;
  std::map<uid_t, int> clientsPerUid_;
  std::set<LinkKey> fixedWatches_;  // --watch: kept for the daemon's lifetime
  bool socketCreated_ = false;
  std::string dirCreated_;  // the socket's directory, when this daemon made it
  bool acceptPaused_ = false;        // out of descriptors: resumes when a client leaves
  uint64_t lastRefusalLogNs_ = 0;
  uint64_t refusalsSinceLog_ = 0;
};

}  // namespace reccl::detector
