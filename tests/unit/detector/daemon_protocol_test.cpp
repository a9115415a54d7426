// The daemon's wire protocol as pure functions: every request decoded or refused with the right
// class of error (kProtocol is answered and drops the client, kInvalidArgument is answered), every message the
// daemon sends carries its version, and a message over the size limit or with more than one
// descriptor is refused on a real socket pair.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>

#include <nlohmann/json.hpp>

#include "reccl/common/unique_fd.h"
#include "reccl/detector/daemon_protocol.h"

namespace reccl::detector {
namespace {

struct RequestCase {
  const char* name;
  const char* text;
  Errc want;  // kOk: decoded
};

void PrintTo(const RequestCase& c, std::ostream* os) { *os << c.name; }

class DecodeRequest : public ::testing::TestWithParam<RequestCase> {};

TEST_P(DecodeRequest, DecodesOrRefusesWithTheRightClass) {
  auto r = decodeRequest(GetParam().text);
  EXPECT_EQ(r.ok() ? Errc::kOk : r.status().code(), GetParam().want) << (r.ok() ? "decoded" : r.status().ToString());
}

INSTANTIATE_TEST_SUITE_P(
    Requests, DecodeRequest,
    ::testing::Values(RequestCase{"hello", R"({"op":"hello","version":2})", Errc::kOk},
                      RequestCase{"hello_without_version", R"({"op":"hello"})", Errc::kOk},
                      RequestCase{"watch", R"({"op":"watch","netns":"/proc/1/ns/net","dev":"eth0"})", Errc::kOk},
                      RequestCase{"unwatch", R"({"op":"unwatch","netns_ino":4026531840,"ifindex":2})", Errc::kOk},
                      RequestCase{"ping", R"({"op":"ping","seq":18446744073709551615})", Errc::kOk},
                      RequestCase{"status", R"({"op":"status"})", Errc::kOk},
                      RequestCase{"map", R"({"op":"map"})", Errc::kOk},
                      RequestCase{"not_json", "{op", Errc::kProtocol},
                      RequestCase{"array", "[1,2]", Errc::kProtocol},
                      RequestCase{"no_op", R"({"dev":"eth0"})", Errc::kProtocol},
                      RequestCase{"op_not_string", R"({"op":7})", Errc::kProtocol},
                      RequestCase{"dev_not_string", R"({"op":"watch","dev":3})", Errc::kProtocol},
                      RequestCase{"ifindex_string", R"({"op":"unwatch","netns_ino":1,"ifindex":"x"})", Errc::kProtocol},
                      RequestCase{"unwatch_without_ifindex", R"({"op":"unwatch","netns_ino":1})", Errc::kProtocol},
                      RequestCase{"negative_seq", R"({"op":"ping","seq":-1})", Errc::kProtocol},
                      RequestCase{"unknown_op", R"({"op":"reboot"})", Errc::kInvalidArgument},
                      RequestCase{"bad_dev", R"({"op":"watch","dev":"a/b"})", Errc::kInvalidArgument},
                      RequestCase{"empty_dev", R"({"op":"watch","dev":""})", Errc::kInvalidArgument},
                      RequestCase{"ifindex_too_big", R"({"op":"unwatch","netns_ino":1,"ifindex":4294967296})",
                                  Errc::kInvalidArgument}),
    [](const auto& p) { return std::string(p.param.name); });

// A refusal names the request's op once it is one the daemon knows, so that the daemon answers
// in that op's name.
TEST(DaemonProtocol, ARefusedRequestSaysItsOpOnceKnown) {
  struct Case {
    const char* text;
    std::optional<DaemonOp> op;
  };
  for (const Case& c : {Case{R"({"op":"watch","dev":"a/b"})", DaemonOp::kWatch},
                        Case{R"({"op":"watch","dev":3})", DaemonOp::kWatch},
                        Case{R"({"op":"ping","seq":-1})", DaemonOp::kPing},
                        Case{R"({"op":"reboot"})", std::nullopt}, Case{"[1]", std::nullopt}}) {
    std::optional<DaemonOp> op;
    auto r = decodeRequest(c.text, &op);
    EXPECT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(op, c.op) << c.text;
  }
}

TEST(DaemonProtocol, ALongNamespaceLabelIsRefused) {
  std::string label(kDaemonMaxNetnsLabel + 1, 'n');
  auto r = decodeRequest(nlohmann::json{{"op", "watch"}, {"netns", label}, {"dev", "eth0"}}.dump());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::kInvalidArgument);
  EXPECT_NE(r.status().message().find("netns"), std::string::npos);
}

TEST(DaemonProtocol, EventsAndStatusCarryTheVersion) {
  LinkEvent e;
  e.type = LinkEventType::kLinkDegraded;
  e.link = {4026531840u, 3};
  e.ifname = "eth1";
  auto ej = nlohmann::json::parse(eventToJson(e));
  EXPECT_EQ(ej.value("version", 0), kDaemonProtocolVersion);
  auto back = eventFromJson(ej.dump());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->type, LinkEventType::kLinkDegraded);
  EXPECT_EQ(back->link, e.link);
  auto sj = nlohmann::json::parse(statusToJson(DetectorStatus{}, 3));
  EXPECT_EQ(sj.value("version", 0), kDaemonProtocolVersion);
  EXPECT_EQ(sj.value("clients", 0), 3);
  EXPECT_TRUE(sj.at("rdma_ports").empty());
  // An RDMA port's counters as last read; packets only where the port counts them.
  DetectorStatus st;
  st.rdmaPorts.push_back({"rxe0", 1, "rail0", 7, 1000, 2});
  st.rdmaPorts.push_back({"mlx5_0", 1, "eth2", 3, std::nullopt, 0});
  auto rj = nlohmann::json::parse(statusToJson(st, 0)).at("rdma_ports");
  ASSERT_EQ(rj.size(), 2u);
  EXPECT_EQ(rj[0].value("rdma_device", ""), "rxe0");
  EXPECT_EQ(rj[0].value("ifname", ""), "rail0");
  EXPECT_EQ(rj[0].value("sequence_errors", 0), 7);
  EXPECT_EQ(rj[0].value("packets", 0), 1000);
  EXPECT_EQ(rj[0].value("degraded_verdicts", 0), 2);
  EXPECT_FALSE(rj[1].contains("packets"));
}

// Numbers in an event or a watch reply are integers in their field's range or the message is
// kProtocol naming the field. Otherwise a float out of range would reach a conversion whose
// result is undefined (the fuzz seed event_float_out_of_range), a negative one would wrap, and a
// large one would be truncated.
TEST(DaemonProtocol, ANumberOutsideItsFieldIsRefusedNamingIt) {
  const std::string head = R"({"op":"event","type":"link_down","netns":"h0",)";
  struct Case {
    const char* field;
    const char* json;
  } cases[] = {
      {"netns_ino", R"("netns_ino":80536641000.0})"},
      {"netns_ino", R"("netns_ino":4294967296})"},
      {"ifindex", R"("ifindex":-1})"},
      {"ifindex", R"("ifindex":2.5})"},
      {"slot", R"("slot":1e300})"},
      {"flaps", R"("flaps":-3})"},
      {"signal_ns", R"("signal_ns":1.5e19})"},
      {"penalty", R"("penalty":"high"})"},
  };
  for (const Case& c : cases) {
    auto e = eventFromJson(head + c.json);
    ASSERT_FALSE(e.ok()) << c.json;
    EXPECT_EQ(e.status().code(), Errc::kProtocol) << c.json;
    EXPECT_NE(e.status().message().find(c.field), std::string::npos) << c.json << ": " << e.status().ToString();
  }
  auto edge = eventFromJson(head + R"("netns_ino":4294967295,"ifindex":7,"flaps":18446744073709551615,"penalty":2})");
  ASSERT_TRUE(edge.ok()) << edge.status().ToString();
  EXPECT_EQ(edge->link.netnsIno, 4294967295u);
  EXPECT_EQ(edge->flaps, 18446744073709551615ull);
  EXPECT_EQ(edge->penalty, 2.0);

  WatchSpec spec;
  spec.netns = "h0";
  spec.ifname = "eth0";
  auto w = watchReplyFromJson(spec, R"({"op":"watch","ok":true,"slot":3,"netns_ino":4026531840,"ifindex":2})");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->slot, 3u);
  EXPECT_EQ(w->key, (LinkKey{4026531840u, 2}));
  EXPECT_EQ(w->ifname, "eth0");
  auto bad = watchReplyFromJson(spec, R"({"op":"watch","ok":true,"slot":3,"netns_ino":4026531840.5,"ifindex":2})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::kProtocol);
  EXPECT_NE(bad.status().message().find("netns_ino"), std::string::npos) << bad.status().ToString();
  auto refused = watchReplyFromJson(spec, R"({"op":"watch","ok":false,"error":"dev: no such device"})");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(refused.status().message(), "dev: no such device");
  EXPECT_EQ(watchReplyFromJson(spec, "not json").status().code(), Errc::kProtocol);
  EXPECT_EQ(watchReplyFromJson(spec, R"({"op":"watch","ok":1})").status().code(), Errc::kProtocol);
}

TEST(DaemonProtocol, AMessageOverTheLimitIsRefusedNotTruncated) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd a(sv[0]), b(sv[1]);
  ASSERT_TRUE(sendMessage(a.get(), std::string(100, 'x')).ok());
  ASSERT_TRUE(sendMessage(a.get(), std::string(101, 'x')).ok());
  auto ok = recvMessage(b.get(), nullptr, 100);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 100u);
  auto big = recvMessage(b.get(), nullptr, 100);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), Errc::kProtocol);
}

size_t openFds() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

TEST(DaemonProtocol, MoreThanOneDescriptorIsRefusedAndNoneLeaks) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd a(sv[0]), b(sv[1]);
  int fds[2] = {STDIN_FILENO, STDOUT_FILENO};
  char byte = 'x';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(fds))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctl;
  msg.msg_controllen = sizeof(ctl);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(c), fds, sizeof(fds));
  ASSERT_EQ(sendmsg(a.get(), &msg, 0), 1);
  size_t before = openFds();
  UniqueFd got;
  auto r = recvMessage(b.get(), &got);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::kProtocol);
  EXPECT_FALSE(got.valid());
  EXPECT_EQ(openFds(), before) << "a received descriptor was left open";
}

}  // namespace
}  // namespace reccl::detector
