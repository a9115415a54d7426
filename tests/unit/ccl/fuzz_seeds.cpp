// Seed inputs for the ccl fuzz targets: one valid message of every kind each target decodes, made
// by the real encoders, so that the fuzzers start past the magic and version checks and mutate
// the fields behind them (a fuzzer that only ever sees random bytes spends its runs on the magic).
// Usage: ccl_fuzz_seeds DIR — writes DIR/<target>/seeds/* and an empty DIR/<target>/corpus (the
// fuzzer's output corpus, emptied on every run so runs stay alike). Each seed must decode with the
// real decoder, or the run fails: a seed the target rejects at once seeds nothing.
#include <array>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "channel/step_header.h"
#include "core/auth.h"
#include "core/wire.h"
#include "failover/migration/migrate_wire.h"
#include "failover/relay/relay_wire.h"
#include "transport/verbs/conn_info.h"

namespace fs = std::filesystem;
using namespace reccl;

namespace {

class Seeds {
 public:
  Seeds(const fs::path& root, const std::string& target) : dir_(root / target / "seeds") {
    fs::remove_all(root / target);
    fs::create_directories(dir_);
    fs::create_directories(root / target / "corpus");
  }
  // `decodes`: the target's decoder accepted the bytes.
  void add(const std::string& name, std::span<const std::byte> bytes, bool decodes) {
    if (!decodes) {
      std::fprintf(stderr, "ccl_fuzz_seeds: the %s seed does not decode\n", name.c_str());
      ok_ = false;
    }
    FILE* f = std::fopen((dir_ / name).c_str(), "wb");
    if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
      std::fprintf(stderr, "ccl_fuzz_seeds: cannot write %s\n", (dir_ / name).c_str());
      ok_ = false;
    }
  }
  bool ok() const { return ok_; }

 private:
  fs::path dir_;
  bool ok_ = true;
};

core::Hello dataHello() {
  core::Hello h;
  h.kind = core::HelloKind::kTcpData;
  h.jobId = 0x1234;
  h.commId = 0x5678;
  h.srcRank = 0;
  h.dstRank = 1;
  h.nranks = 4;
  h.channel = 1;
  h.epoch = 3;
  return h;
}

core::RankInfo rankInfo(int rank) {
  core::RankInfo r;
  r.rank = rank;
  r.hostId = "boot-id/host/netns";
  r.hostName = "host";
  r.pid = 100 + static_cast<uint32_t>(rank);
  r.dataPort = 40000;
  r.chunkBytes = 1 << 19;
  r.slots = 8;
  r.cpus = 2;
  r.onlineCpus = 2;
  r.nics = {{"rail0", 0x0100000a}, {"rail1", 0x0101000a}};
  r.homeRail = static_cast<int16_t>(rank % 2);
  return r;
}

bool hello(const fs::path& root) {
  Seeds s(root, "fuzz_hello");
  std::array<std::byte, core::kHelloBytes> h;
  encodeHello(dataHello(), h);
  s.add("hello", h, core::decodeHello(h).ok());
  // Sealed under the key and challenge the target opens with (all zero): the MAC verifies, so
  // mutations reach the checks after it.
  std::array<std::byte, core::kAuthHelloBytes> sealed;
  core::sealHello(dataHello(), core::Key{}, core::Nonce{}, sealed);
  s.add("auth_hello", sealed, core::openAuthHello(sealed, core::Key{}, core::Nonce{}).ok());
  std::array<std::byte, core::kChallengeBytes> ch;
  core::encodeChallenge(core::AuthPurpose::kData, core::Nonce{}, ch);
  s.add("challenge", ch, core::decodeChallenge(ch, core::AuthPurpose::kData).ok());
  std::array<std::byte, core::kHelloReplyBytes> reply;
  core::encodeHelloReply(core::HelloReply{core::ReplyStatus::kOk, 2, 17}, reply);
  s.add("hello_reply", reply, core::decodeHelloReply(reply).ok());
  std::array<std::byte, core::kRootFrameHeaderBytes> frame;
  core::encodeRootFrameHeader(core::RootFrameHeader{core::RootFrame::kTable, 600}, frame);
  s.add("root_frame", frame, core::decodeRootFrameHeader(frame, 1 << 20).ok());
  std::array<std::byte, core::kUniqueIdBytes> id;
  core::encodeUniqueId(core::UniqueIdData{0x0100007f, 29500, 0x1234, core::Key{}}, id);
  s.add("unique_id", id, core::decodeUniqueId(id).ok());
  return s.ok();
}

bool stepHeader(const fs::path& root) {
  Seeds s(root, "fuzz_step_header");
  channel::StepHeader h;
  h.step = 5;
  h.epoch = 2;
  h.bytes = 4096;
  h.desc.seq = 9;
  h.desc.count = 1024;
  h.desc.kind = channel::CollKind::kAllReduce;
  std::array<std::byte, channel::kStepHeaderBytes> hb;
  channel::encodeStepHeader(h, hb);
  s.add("step_header", hb, channel::decodeStepHeader(hb).ok());
  std::array<std::byte, channel::kAckFrameBytes> ab;
  channel::encodeAck(channel::AckFrame{2, 5}, ab);
  s.add("ack", ab, channel::decodeAck(ab).ok());
  return s.ok();
}

bool bootstrap(const fs::path& root) {
  Seeds s(root, "fuzz_bootstrap");
  auto info = core::encodeRankInfo(rankInfo(1));
  s.add("rank_info", info, core::decodeRankInfo(info).ok());
  // The target reads a table of 1 + in[0] % 8 ranks after one leading byte.
  for (int n : {2, 3}) {
    std::vector<core::RankInfo> table;
    for (int r = 0; r < n; ++r) table.push_back(rankInfo(r));
    std::vector<std::byte> in{static_cast<std::byte>(n - 1)};
    auto t = core::encodeRankTable(table);
    in.insert(in.end(), t.begin(), t.end());
    s.add("rank_table_" + std::to_string(n), in, core::decodeRankTable(std::span(in).subspan(1), n).ok());
  }
  return s.ok();
}

bool failoverWire(const fs::path& root) {
  Seeds s(root, "fuzz_failover_wire");
  failover::MigrateRequest req;
  req.conn = {0, 1, 1};
  req.initiator = failover::Role::kReceiver;
  req.reason = failover::MigrateReason::kLinkDown;
  req.rail = 1;
  req.epoch = 5;  // odd: a receiver-initiated epoch
  req.received = 12;
  req.applied = 11;
  req.railsUp = 0x2;
  std::array<std::byte, failover::kMigrateRequestBytes> rq;
  failover::encodeMigrateRequest(req, rq);
  s.add("migrate_request", rq, failover::decodeMigrateRequest(rq).ok());
  failover::MigrateReply rep;
  rep.epoch = 5;
  rep.received = 12;
  rep.applied = 11;
  rep.railsUp = 0x3;
  std::array<std::byte, failover::kMigrateReplyBytes> rp;
  failover::encodeMigrateReply(rep, rp);
  s.add("migrate_reply", rp, failover::decodeMigrateReply(rp).ok());
  // The target checks a relay open against origin 0 among 1 + in[0] % 64 ranks (19 for this
  // message's first byte): rank 0 is the connection's sender, rank 1 the peer.
  failover::RelayOpen open;
  open.conn = {0, 1, 0};
  open.peer = 1;
  open.rail = 1;
  std::array<std::byte, failover::kRelayOpenBytes> ob;
  failover::encodeRelayOpen(open, ob);
  s.add("relay_open", ob, failover::decodeRelayOpen(ob, 0, 1 + static_cast<int>(ob[0]) % 64).ok());
  std::array<std::byte, failover::kRelayReplyBytes> rr;
  failover::encodeRelayReply(failover::RelayReply{failover::RelayStatus::kOk, 0x3}, rr);
  s.add("relay_reply", rr, failover::decodeRelayReply(rr).ok());
  return s.ok();
}

bool verbsConnInfo(const fs::path& root) {
  Seeds s(root, "fuzz_verbs_conn_info");
  transport::verbs::ConnInfo c;
  c.role = transport::verbs::ConnRole::kReceiver;
  c.mtu = 3;
  c.rail = 1;
  c.qpn = 0x11;
  c.psn = 0x123;
  c.epoch = 1;
  c.gid[10] = 0xff;
  c.gid[11] = 0xff;
  c.addr = 0x7f0000001000;
  c.rkey = 0x42;
  c.slots = 8;
  c.chunkBytes = 1 << 19;
  std::array<std::byte, transport::verbs::kConnInfoBytes> b;
  transport::verbs::encodeConnInfo(c, b);
  s.add("conn_info", b, transport::verbs::decodeConnInfo(b).ok());
  return s.ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ccl_fuzz_seeds DIR\n");
    return 64;
  }
  fs::path root(argv[1]);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    std::fprintf(stderr, "ccl_fuzz_seeds: %s: %s\n", argv[1], ec.message().c_str());
    return 1;
  }
  bool ok = hello(root) & stepHeader(root) & bootstrap(root) & failoverWire(root) & verbsConnInfo(root);
  return ok ? 0 : 1;
}
