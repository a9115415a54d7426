#include "metrics_server.h"

#include <CivetServer.h>
#include <arpa/inet.h>
#include <prometheus/exposer.h>

#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "daemon_metrics.h"
#include "reccl/common/log.h"

namespace reccl::detector {

namespace {
constexpr const char* kPath = "/metrics";
constexpr unsigned kCivetIpv6 = 8;  // mg_check_feature() bit

// Everything but GET /metrics is answered here; GET /metrics goes on to the exposer (civetweb
// itself would match /metrics as a prefix: /metricsXYZ, /metrics/x).
int beginRequest(mg_connection* conn) {
  const mg_request_info* ri = mg_get_request_info(conn);
  const char* method = ri && ri->request_method ? ri->request_method : "";
  const char* uri = ri && ri->local_uri ? ri->local_uri : "";
  bool head = std::strcmp(method, "HEAD") == 0;
  bool get = std::strcmp(method, "GET") == 0;
  if (std::strcmp(uri, kPath) != 0) {
    mg_response_header_start(conn, 404);
    mg_response_header_add(conn, "Content-Type", "text/plain; charset=utf-8", -1);
    mg_response_header_add(conn, "Content-Length", "10", -1);
    mg_response_header_send(conn);
    if (!head) mg_write(conn, "not found\n", 10);
    return 404;
  }
  if (get) return 0;
  if (head) {
    mg_response_header_start(conn, 200);
    mg_response_header_add(conn, "Content-Type", "text/plain; charset=utf-8", -1);  // as prometheus-cpp's GET
    mg_response_header_send(conn);
    return 200;
  }
  mg_response_header_start(conn, 405);
  mg_response_header_add(conn, "Allow", "GET, HEAD", -1);
  mg_response_header_add(conn, "Content-Type", "text/plain; charset=utf-8", -1);
  mg_response_header_add(conn, "Content-Length", "19", -1);
  mg_response_header_send(conn);
  mg_write(conn, "method not allowed\n", 19);
  return 405;
}

// While this thread starts the server, civetweb's messages are kept here: its constructor's
// exception says only "null context ... Possible problem binding to port", the message before it
// says what failed ("cannot bind to 127.0.0.1:9464: 98 (Address already in use)").
thread_local std::vector<std::string>* startMessages = nullptr;

void warnCivet(const char* message) { RECCL_WARN(kLogDetector, "detectord: metrics server: %s", message); }

// civetweb's own messages through our logger.
int logMessage(const mg_connection*, const char* message) {
  if (startMessages) startMessages->emplace_back(message);
  else warnCivet(message);
  return 1;
}
}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const MetricsServerOptions& opts,
                                                            const DaemonMetrics& metrics) {
  if (opts.port < 0 || opts.port > 65535) return Status(Errc::kInvalidArgument, "metrics-port: must be 0..65535");
  in6_addr a6{};
  in_addr a4{};
  std::string listen;
  if (inet_pton(AF_INET, opts.address.c_str(), &a4) == 1)
    listen = opts.address + ":" + std::to_string(opts.port);
  else if (inet_pton(AF_INET6, opts.address.c_str(), &a6) == 1) {
    if (!mg_check_feature(kCivetIpv6))
      return Status(Errc::kUnsupported, "metrics-addr: '" + opts.address +
                                            "' is IPv6, and this civetweb was built without IPv6 (Debian's is)");
    listen = "[" + opts.address + "]:" + std::to_string(opts.port);
  } else
    return Status(Errc::kInvalidArgument, "metrics-addr: not an IPv4 or IPv6 address '" + opts.address + "'");
  static CivetCallbacks callbacks = [] {
    CivetCallbacks cb;
    cb.begin_request = beginRequest;
    cb.log_message = logMessage;
    return cb;
  }();
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  std::vector<std::string> civet = {"listening_ports", listen,
                                    "num_threads", std::to_string(opts.threads),
                                    "request_timeout_ms", std::to_string(opts.requestTimeoutMs),
                                    "enable_keep_alive", "no"};
  std::vector<std::string> said;
  std::optional<std::string> failed;
  startMessages = &said;
  try {
    s->exposer_ = std::make_unique<prometheus::Exposer>(civet, &callbacks);
  } catch (const std::exception& e) {
    failed = said.empty() ? e.what() : said.front();
  }
  startMessages = nullptr;
  if (failed) return Status(Errc::kSystem, "metrics: cannot listen on " + listen + ": " + *failed);
  for (const std::string& m : said) warnCivet(m.c_str());
  s->exposer_->RegisterCollectable(metrics.registry(), kPath);
  s->exposer_->RegisterCollectable(metrics.stateCollector(), kPath);
  auto ports = s->exposer_->GetListeningPorts();
  if (ports.empty()) return Status(Errc::kSystem, "metrics: no listening port on " + listen);
  s->port_ = ports.front();
  return s;
}

MetricsServer::~MetricsServer() = default;

}  // namespace reccl::detector
