// reccl-detectord's server: one Detector for the node, clients on a SOCK_SEQPACKET unix
// socket, Prometheus metrics over HTTP on localhost, JSON-lines logs, clean exit on
// SIGTERM/SIGINT (BPF links and programs released with the Detector; nothing is pinned).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "daemon_metrics.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "reccl/detector/detector.h"

namespace reccl::detector {

struct DaemonOptions {
  std::string socketPath = "/run/reccl/detectord.sock";
  std::string group;        // may connect besides root; empty: root only
  int metricsPort = 9464;   // 127.0.0.1; 0 picks a free port; -1 disables
  std::string metricsAddr = "127.0.0.1";
  DetectorOptions detector;
};

class DetectorDaemon {
 public:
  static Result<std::unique_ptr<DetectorDaemon>> create(DaemonOptions opts);
  ~DetectorDaemon();
  // Serves until SIGTERM or SIGINT (blocked and read through a signalfd).
  Status run();
  int metricsPort() const { return metricsPort_; }

 private:
  struct Client {
    UniqueFd sock;
    std::set<LinkKey> watches;
    int pid = 0;
    int uid = -1;
  };
  DetectorDaemon() = default;
  Status setupSocket();
  Status setupMetrics();
  void acceptClient();
  void onClient(int fd);
  void dropClient(int fd, const char* why);
  void handleRequest(Client& c, const std::string& msg);
  // Stops watching `key` when no client watches it any more (and it was not given on the
  // command line): its slot in the link-state array is free again.
  void releaseWatch(const LinkKey& key);
  void serveMetrics();
  void deliverEvents();

  DaemonOptions opts_;
  std::unique_ptr<Detector> det_;
  DaemonMetrics metrics_;
  UniqueFd epoll_, listen_, metricsListen_, signalFd_;
  int metricsPort_ = -1;
  std::map<int, Client> clients_;
  std::set<LinkKey> fixedWatches_;  // --watch: kept for the daemon's lifetime
  bool socketCreated_ = false;
};

}  // namespace reccl::detector
