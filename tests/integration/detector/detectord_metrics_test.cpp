// reccl-detectord's /metrics as Prometheus and an HTTP client see it: promtool's checks (HELP on
// every metric, names, types), node_exporter's label names, states as labels, build_info, and
// HTTP methods and paths answered as a real server answers them. Runs without root: the daemon
// watches lo with rtnetlink.
#include <arpa/inet.h>
#include <civetweb.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <set>
#include <sstream>

#include "daemon_process.h"

namespace reccl::detector {
namespace {

using testing::DaemonProcess;
using testing::httpRequest;

std::string body(const std::string& response) {
  auto p = response.find("\r\n\r\n");
  return p == std::string::npos ? "" : response.substr(p + 4);
}

int statusCode(const std::string& response) {
  std::smatch m;
  std::regex re("^HTTP/1\\.[01] ([0-9]{3})");
  return std::regex_search(response, m, re) ? std::stoi(m[1]) : 0;
}

class DetectordMetrics : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonProcess>(std::vector<std::string>{"--source", "netlink", "--watch", "lo"});
    port_ = daemon_->waitStarted(15000);
    ASSERT_GT(port_, 0) << daemon_->logText();
  }
  std::unique_ptr<DaemonProcess> daemon_;
  int port_ = 0;
};

TEST_F(DetectordMetrics, PassPromtoolCheck) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool not installed (Debian package prometheus; scripts/setup.sh installs it)";
  std::string text = body(httpRequest(port_, "GET", "/metrics"));
  ASSERT_FALSE(text.empty());
  std::string file = "/tmp/rdt-metrics-" + std::to_string(getpid()) + ".txt";
  FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  FILE* p = popen(("promtool check metrics < " + file + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int status = pclose(p);
  unlink(file.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "promtool check metrics:\n" << out << "\n" << text;
}

TEST_F(DetectordMetrics, EveryMetricHasHelpAndTheLabelsPrometheusUsersExpect) {
  std::string text = body(httpRequest(port_, "GET", "/metrics"));
  std::set<std::string> typed, helped;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, std::regex("# TYPE ([a-z_:]+) .*"))) typed.insert(m[1]);
    if (std::regex_match(line, m, std::regex("# HELP ([a-z_:]+) .+"))) helped.insert(m[1]);
  }
  EXPECT_GE(typed.size(), 10u) << text;
  for (const auto& name : typed) EXPECT_TRUE(helped.count(name)) << name << " has no HELP";
  // node_exporter's label for a network device is `device`; states are labels.
  EXPECT_NE(text.find("reccl_detector_link_state{device=\"lo\",netns=\"\",state=\"up\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("reccl_detector_link_state{device=\"lo\",netns=\"\",state=\"down\"} 0"), std::string::npos);
  EXPECT_NE(text.find("reccl_detector_link_state{device=\"lo\",netns=\"\",state=\"degraded\"} 0"), std::string::npos);
  EXPECT_EQ(text.find("dev=\""), std::string::npos) << "the old label name";
  EXPECT_TRUE(std::regex_search(text, std::regex("\nreccl_detectord_build_info\\{[^}]*version=\"[^\"]+\"[^}]*\\} 1")))
      << text;
  EXPECT_NE(text.find("reccl_detector_source_active{source=\"rtnetlink\"} 1"), std::string::npos);
}

struct HttpCase {
  const char* method;
  const char* path;
  int status;
  bool hasBody;
  const char* header;  // a header the answer must carry ("" none)
};

void PrintTo(const HttpCase& c, std::ostream* os) { *os << c.method << " " << c.path; }

class DetectordHttp : public DetectordMetrics, public ::testing::WithParamInterface<HttpCase> {};

TEST_P(DetectordHttp, AnswersLikeARealServer) {
  const HttpCase& c = GetParam();
  std::string r = httpRequest(port_, c.method, c.path);
  EXPECT_EQ(statusCode(r), c.status) << r.substr(0, 300);
  EXPECT_EQ(!body(r).empty(), c.hasBody) << r.substr(0, 300);
  if (*c.header) {
    EXPECT_NE(r.find(c.header), std::string::npos) << r.substr(0, 300);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Requests, DetectordHttp,
    ::testing::Values(HttpCase{"GET", "/metrics", 200, true, "Content-Type: text/plain"},
                      HttpCase{"GET", "/metrics?x=1", 200, true, ""},
                      HttpCase{"HEAD", "/metrics", 200, false, "Content-Type: text/plain"},
                      HttpCase{"GET", "/metricsXYZ", 404, true, ""},
                      HttpCase{"GET", "/metrics/x", 404, true, ""},
                      HttpCase{"GET", "/", 404, true, ""},
                      HttpCase{"HEAD", "/nope", 404, false, ""},
                      HttpCase{"POST", "/metrics", 405, true, "Allow: GET, HEAD"},
                      HttpCase{"DELETE", "/metrics", 405, true, "Allow: GET, HEAD"}));

// The RDMA ports of watched links (the rdma_counters source), from a sysfs-shaped tree handed over
// with --rdma-sysfs (a container's mount of the host's): the kernel's totals per port with
// node_exporter's `device` for the netdev, the DEGRADED they produced, and the status JSON's
// "rdma_ports"; promtool accepts the page.
TEST(DetectordRdmaMetrics, AWatchedPortsCountersAndVerdicts) {
  char tmpl[] = "/tmp/reccl-rdma-metrics-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() { (void)std::system(("rm -rf '" + dir + "'").c_str()); }
  } cleanup{root};
  // Each file replaced whole (a rename), so the daemon never reads one half-written.
  auto put = [&](const std::string& rel, uint64_t v) {
    std::string path = root + "/rxe_lo/ports/1/" + rel;
    (void)std::system(("mkdir -p '" + path.substr(0, path.rfind('/')) + "'").c_str());
    const std::string tmp = root + ".next";  // beside the tree: the daemon lists what is in it
    FILE* f = std::fopen(tmp.c_str(), "w");
    ASSERT_NE(f, nullptr) << tmp;
    std::fprintf(f, "%llu\n", static_cast<unsigned long long>(v));
    std::fclose(f);
    ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0) << path;
  };
  // The errors last: a read that sees them sees the packets they came with.
  auto counters = [&](uint64_t oos, uint64_t pkts) {
    put("hw_counters/sent_pkts", pkts);
    put("hw_counters/rcvd_pkts", pkts);
    put("hw_counters/rcvd_seq_err", 0);
    put("hw_counters/out_of_seq_request", oos);
  };
  {
    std::string ndev = root + "/rxe_lo/ports/1/gid_attrs/ndevs";
    ASSERT_EQ(std::system(("mkdir -p '" + ndev + "' && echo lo > '" + ndev + "/0'").c_str()), 0);
  }
  counters(0, 0);
  DaemonProcess daemon({"--source", "netlink", "--watch", "lo", "--rdma-sysfs", root});
  int port = daemon.waitStarted(15000);
  ASSERT_GT(port, 0) << daemon.logText();
  // The first reads, then 5 errors in 1,000 packets: one DEGRADED.
  usleep(300'000);
  counters(5, 500);
  std::string text;
  const std::string want = R"(reccl_detector_rdma_degraded_total{device="lo",rdma_device="rxe_lo",port="1"} 1)";
  for (int i = 0; i < 100 && text.find(want) == std::string::npos; ++i) {
    usleep(50'000);
    text = body(httpRequest(port, "GET", "/metrics"));
  }
  EXPECT_NE(text.find(want), std::string::npos) << text;
  EXPECT_NE(text.find(R"(reccl_detector_rdma_sequence_errors_total{device="lo",rdma_device="rxe_lo",port="1"} 5)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(reccl_detector_rdma_packets_total{device="lo",rdma_device="rxe_lo",port="1"} 1000)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(reccl_detector_source_active{source="rdma_counters"} 1)"), std::string::npos) << text;
  if (std::system("command -v promtool >/dev/null 2>&1") == 0) {
    std::string file = root + "/metrics.txt";
    FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    EXPECT_EQ(std::system(("promtool check metrics < '" + file + "' >/dev/null 2>&1").c_str()), 0) << text;
  }
}

TEST(DetectordMetricsAddr, ListensWhereItIsTold) {
  // All of 127/8 is loopback: a second address tells "where it is told" from "everywhere".
  DaemonProcess daemon({"--source", "netlink", "--metrics-addr", "127.0.0.2"});
  int port = daemon.waitStarted(15000);
  ASSERT_GT(port, 0) << daemon.logText();
  EXPECT_EQ(statusCode(httpRequest(port, "GET", "/metrics", "127.0.0.2")), 200);
  EXPECT_EQ(httpRequest(port, "GET", "/metrics", "127.0.0.1"), "") << "listening beyond 127.0.0.2";
}

// Debian's civetweb has no IPv6: an IPv6 address is then refused as unsupported (exit 77)
// naming the option, never a silent IPv4 fallback.
TEST(DetectordMetricsAddr, AnIpv6AddressWorksOrIsRefusedAsUnsupported) {
  DaemonProcess daemon({"--source", "netlink", "--metrics-addr", "::1"});
  int port = daemon.waitStarted(15000);
  if (mg_check_feature(8)) {
    ASSERT_GT(port, 0) << daemon.logText();
    EXPECT_EQ(statusCode(httpRequest(port, "GET", "/metrics", "::1")), 200);
  } else {
    EXPECT_EQ(port, 0);
    EXPECT_EQ(daemon.terminate(5000), 77);
    EXPECT_NE(daemon.logText().find("metrics-addr"), std::string::npos) << daemon.logText();
  }
}

TEST(DetectordMetricsAddr, ABadAddressIsAUsageError) {
  DaemonProcess daemon({"--source", "netlink", "--metrics-addr", "localhost:80"});
  EXPECT_EQ(daemon.waitStarted(15000), 0);
  EXPECT_EQ(daemon.terminate(5000), 64);
  EXPECT_NE(daemon.logText().find("metrics-addr"), std::string::npos) << daemon.logText();
}

// A port another process holds: the daemon fails (1) saying what the kernel said, not only
// civetweb's "Possible problem binding to port".
TEST(DetectordMetricsAddr, ABusyPortIsNamedWithTheBindError) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string port = std::to_string(ntohs(a.sin_port));
  DaemonProcess daemon({"--source", "netlink", "--metrics-port", port});
  EXPECT_EQ(daemon.waitStarted(15000), 0);
  EXPECT_EQ(daemon.terminate(5000), 1);
  close(fd);
  const std::string log = daemon.logText();
  EXPECT_NE(log.find("metrics: cannot listen on 127.0.0.1:" + port + ": cannot bind to 127.0.0.1:" + port),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("Address already in use"), std::string::npos) << log;
}

}  // namespace
}  // namespace reccl::detector
