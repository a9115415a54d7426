// The daemon's /metrics endpoint: prometheus-cpp's exposer (civetweb) on its own threads, so no
// scrape, slow or silent, ever runs on the daemon's event loop. A request that does not finish
// within the request timeout is dropped by the server. GET /metrics is the exposition; HEAD
// /metrics answers its headers; other paths are 404, other methods 405 (with Allow).
#pragma once

#include <memory>
#include <string>

#include "reccl/common/status.h"

namespace prometheus {
class Exposer;
class Collectable;
}  // namespace prometheus

namespace reccl::detector {

class DaemonMetrics;

struct MetricsServerOptions {
  std::string address = "127.0.0.1";  // IPv4 or IPv6 literal
  int port = 9464;                    // 0: any free port
  int threads = 4;
  int requestTimeoutMs = 2000;
};

class MetricsServer {
 public:
  static Result<std::unique_ptr<MetricsServer>> start(const MetricsServerOptions& opts, const DaemonMetrics& metrics);
  ~MetricsServer();
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = -1;
};

}  // namespace reccl::detector
