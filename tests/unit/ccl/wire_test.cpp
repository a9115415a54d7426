// Pure parsers and policies: hello, step header, ack, rank info/table, unique id, NIC lists,
// launcher environment, topology; and the channel ports' slot/step/ack rules without a transport.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include "channel/port.h"
#include "channel/step_header.h"
#include "core/comm.h"
#include "core/launch_env.h"
#include "core/topology.h"
#include "core/wire.h"
#include "reccl/reccl.h"

namespace {

using namespace reccl;

TEST(CclWire, HelloRoundTripAndRejects) {
  core::Hello h;
  h.kind = core::HelloKind::kShmData;
  h.jobId = 0x1234;
  h.commId = 77;
  h.nonce[3] = std::byte{9};
  h.srcRank = 3;
  h.dstRank = 1;
  h.nranks = 4;
  h.channel = 2;
  h.shmName = "/reccl-1-abc";
  std::array<std::byte, core::kHelloBytes> b;
  core::encodeHello(h, b);
  auto d = core::decodeHello(b);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->shmName, h.shmName);
  EXPECT_EQ(d->srcRank, 3);
  EXPECT_EQ(d->jobId, 0x1234u);
  EXPECT_EQ(d->nonce, h.nonce);
  EXPECT_TRUE(core::acceptHello(*d, 77, 4, 1).ok());
  EXPECT_EQ(core::acceptHello(*d, 78, 4, 1).code(), Errc::kPermission);
  EXPECT_FALSE(core::acceptHello(*d, 77, 5, 1).ok());
  EXPECT_FALSE(core::acceptHello(*d, 77, 4, 2).ok());
  EXPECT_FALSE(core::decodeHello(std::span(b).first(100)).ok());
  auto bad = b;
  bad[0] = std::byte{0};
  EXPECT_FALSE(core::decodeHello(bad).ok());
  h.srcRank = 4;  // out of range
  core::encodeHello(h, b);
  EXPECT_FALSE(core::decodeHello(b).ok());
  h.srcRank = 0;
  h.shmName = "/../etc/x";
  core::encodeHello(h, b);
  EXPECT_FALSE(core::decodeHello(b).ok());
}

// recclCommShrink's note: round trip, short and malformed notes refused; a shrink hello decodes
// (kind 4) and a kind past it does not.
TEST(CclWire, ShrinkNoteRoundTripAndRejects) {
  core::ShrinkNote n;
  n.nranks = 3;
  n.excluded[0] = std::byte{0xAB};
  n.id.addr = 0x0100007f;
  n.id.port = 4321;
  n.id.jobId = 99;
  n.id.bootKey[5] = std::byte{7};
  std::array<std::byte, core::kShrinkNoteBytes> b;
  core::encodeShrinkNote(n, b);
  auto d = core::decodeShrinkNote(b);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->nranks, 3);
  EXPECT_EQ(d->excluded, n.excluded);
  EXPECT_EQ(d->id.port, 4321);
  EXPECT_EQ(d->id.jobId, 99u);
  EXPECT_EQ(d->id.bootKey, n.id.bootKey);
  EXPECT_FALSE(core::decodeShrinkNote(std::span(b).first(core::kShrinkNoteBytes - 1)).ok());
  n.nranks = 0;
  core::encodeShrinkNote(n, b);
  EXPECT_FALSE(core::decodeShrinkNote(b).ok()) << "no ranks left";
  n.nranks = 3;
  n.id.port = 0;
  core::encodeShrinkNote(n, b);
  EXPECT_FALSE(core::decodeShrinkNote(b).ok()) << "a unique id without a port";

  core::Hello h;
  h.kind = core::HelloKind::kShrink;
  h.commId = 5;
  h.srcRank = 0;
  h.dstRank = 2;
  h.nranks = 4;
  h.epoch = 7;  // the shrink serial
  std::array<std::byte, core::kHelloBytes> hb;
  core::encodeHello(h, hb);
  auto dh = core::decodeHello(hb);
  ASSERT_TRUE(dh.ok()) << dh.status().message();
  EXPECT_EQ(dh->kind, core::HelloKind::kShrink);
  EXPECT_EQ(dh->epoch, 7u);
  EXPECT_TRUE(core::acceptHello(*dh, 5, 4, 2).ok());
  hb[6] = std::byte{6};  // kind 6
  EXPECT_FALSE(core::decodeHello(hb).ok());
  // Two lists that differ differ in their digest; one list, one digest.
  EXPECT_NE(core::Comm::shrinkDigest({1}), core::Comm::shrinkDigest({2}));
  EXPECT_NE(core::Comm::shrinkDigest({1}), core::Comm::shrinkDigest({1, 2}));
  EXPECT_EQ(core::Comm::shrinkDigest({1, 3}), core::Comm::shrinkDigest({1, 3}));
}

TEST(CclWire, StepHeaderAckAndVerdicts) {
  channel::StepHeader h;
  h.step = 9;
  h.epoch = 2;
  h.bytes = 4096;
  h.desc = {5, 1000, -1, channel::CollKind::kAllReduce, 7, 0};
  std::array<std::byte, channel::kStepHeaderBytes> b;
  channel::encodeStepHeader(h, b);
  auto d = channel::decodeStepHeader(b);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->step, 9u);
  EXPECT_EQ(d->flags, 0u);
  EXPECT_EQ(d->desc, h.desc);
  h.flags = channel::kStepFlagAckNow;
  channel::encodeStepHeader(h, b);
  auto f = channel::decodeStepHeader(b);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->flags, channel::kStepFlagAckNow);
  EXPECT_EQ(f->epoch, 2u);
  EXPECT_EQ(channel::classifyStep(*d, 8, 2, 4096), channel::StepVerdict::kNext);
  EXPECT_EQ(channel::classifyStep(*d, 9, 2, 4096), channel::StepVerdict::kDuplicate);
  EXPECT_EQ(channel::classifyStep(*d, 20, 2, 4096), channel::StepVerdict::kDuplicate);
  EXPECT_EQ(channel::classifyStep(*d, 8, 3, 4096), channel::StepVerdict::kStale);
  EXPECT_EQ(channel::classifyStep(*d, 8, 1, 4096), channel::StepVerdict::kBad);
  EXPECT_EQ(channel::classifyStep(*d, 5, 2, 4096), channel::StepVerdict::kBad);  // gap
  EXPECT_EQ(channel::classifyStep(*d, 8, 2, 1024), channel::StepVerdict::kBad);  // too big
  channel::CollDesc other = h.desc;
  other.count = 999;
  Status s = channel::checkDesc(h.desc, other, 3);
  EXPECT_NE(s.message().find("count"), std::string::npos);
  // A disagreement between ranks is a usage error by code (the C API maps the code, not the text).
  EXPECT_EQ(s.code(), Errc::kInvalidUsage) << s.ToString();
  EXPECT_TRUE(channel::checkDesc(h.desc, h.desc, 3).ok());
  struct Case {
    const char* what;
    void (*change)(channel::CollDesc&);
  };
  for (const Case& c : {Case{"collective", [](channel::CollDesc& x) { x.kind = channel::CollKind::kBroadcast; }},
                        Case{"sequence", [](channel::CollDesc& x) { x.seq += 1; }},
                        Case{"root", [](channel::CollDesc& x) { x.root = 2; }},
                        Case{"type", [](channel::CollDesc& x) { x.dtype += 1; }},
                        Case{"op", [](channel::CollDesc& x) { x.op += 1; }}}) {
    channel::CollDesc o = h.desc;
    c.change(o);
    Status m = channel::checkDesc(h.desc, o, 3);
    EXPECT_EQ(m.code(), Errc::kInvalidUsage) << c.what << ": " << m.ToString();
    EXPECT_NE(m.message().find(c.what), std::string::npos) << m.message();
    EXPECT_NE(m.message().find("rank 3"), std::string::npos) << m.message();
  }
  // Types and ops by their names; a value no type has, by its number.
  channel::CollDesc f32 = h.desc, f64 = h.desc;
  f32.dtype = recclFloat32;
  f64.dtype = recclFloat64;
  EXPECT_NE(channel::checkDesc(f32, f64, 1).message().find("this rank has float, rank 1 has double"),
            std::string::npos)
      << channel::checkDesc(f32, f64, 1).message();
  f64.dtype = 200;
  EXPECT_NE(channel::checkDesc(f32, f64, 1).message().find("rank 1 has 200"), std::string::npos);
  channel::CollDesc sum = h.desc, mx = h.desc;
  sum.op = recclSum;
  mx.op = recclMax;
  EXPECT_NE(channel::checkDesc(sum, mx, 1).message().find("this rank has sum, rank 1 has max"), std::string::npos)
      << channel::checkDesc(sum, mx, 1).message();
  // Data of another collective number: both collectives named as each rank called them.
  channel::CollDesc now{2, 10, -1, channel::CollKind::kAllReduce, recclFloat32, recclSum};
  channel::CollDesc earlier{1, 1000, 1, channel::CollKind::kBroadcast, recclFloat32, recclSum};
  Status late = channel::checkDesc(now, earlier, 1);
  EXPECT_EQ(late.code(), Errc::kInvalidUsage);
  for (const char* part : {"this rank is in allreduce #2 (10 float, sum)",
                           "rank 1 sent data of its broadcast #1 (1000 float, root 1)",
                           "collective #1 ended without receiving"})
    EXPECT_NE(late.message().find(part), std::string::npos) << late.message();
  Status ahead = channel::checkDesc(earlier, now, 1);
  EXPECT_NE(ahead.message().find("rank 1 is past this rank's collective #1"), std::string::npos) << ahead.message();
  std::array<std::byte, channel::kAckFrameBytes> ab;
  channel::encodeAck({4, 77}, ab);
  auto a = channel::decodeAck(ab);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->applied, 77u);
  ab[9] = std::byte{0xff};
  EXPECT_FALSE(channel::decodeAck(ab).ok());
}

TEST(CclWire, RankInfoAndTable) {
  core::RankInfo r;
  r.rank = 1;
  r.hostId = "boot/host/net:1";
  r.hostName = "host";
  r.dataPort = 1234;
  r.chunkBytes = 4096;
  r.slots = 8;
  r.cpus = 3;
  r.onlineCpus = 96;
  r.channelThreads = 2;
  r.transport = 1;
  r.rdmaReady = false;
  r.rdmaWhy = "rail NIC rail1: rxe_rail1 port 1 is DOWN";
  r.nics = {{"rail0", 1}, {"rail1", 2}};
  r.homeRail = 1;
  auto b = core::encodeRankInfo(r);
  auto d = core::decodeRankInfo(b);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->homeRail, 1);
  for (int16_t bad : {-2, 2}) {  // a rail it has no NIC for
    core::RankInfo o = r;
    o.homeRail = bad;
    auto refused = core::decodeRankInfo(core::encodeRankInfo(o));
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("bad home rail"), std::string::npos) << refused.status().message();
  }
  EXPECT_EQ(d->transport, 1);
  EXPECT_FALSE(d->rdmaReady);
  EXPECT_EQ(d->rdmaWhy, r.rdmaWhy);
  EXPECT_EQ(d->cpus, 3);
  EXPECT_EQ(d->onlineCpus, 96);
  EXPECT_EQ(d->channelThreads, 2);
  EXPECT_EQ(d->nics.size(), 2u);
  EXPECT_EQ(d->nics[1].name, "rail1");
  for (size_t cut = 0; cut < b.size(); ++cut) EXPECT_FALSE(core::decodeRankInfo(std::span(b).first(cut)).ok());
  core::RankInfo r0 = r;
  r0.rank = 0;
  auto t = core::encodeRankTable({r0, r});
  EXPECT_TRUE(core::decodeRankTable(t, 2).ok());
  EXPECT_FALSE(core::decodeRankTable(t, 3).ok());
  EXPECT_FALSE(core::decodeRankTable(core::encodeRankTable({r, r0}), 2).ok());  // out of order
}

// recclCommInitRankScalable's blocks: consecutive, never empty, covering every rank once, sizes
// within one of each other; blockOfRank finds each rank's.
TEST(CclWire, RankBlocksPartitionTheRanks) {
  for (int n = 1; n <= 130; ++n)
    for (int roots = 1; roots <= std::min(n, 40); ++roots) {
      int next = 0, smallest = n, largest = 0;
      for (int k = 0; k < roots; ++k) {
        const reccl::core::RankBlock b = reccl::core::rankBlock(n, roots, k);
        ASSERT_EQ(b.first, next) << n << " ranks, " << roots << " roots, block " << k;
        ASSERT_GT(b.size(), 0) << n << " ranks, " << roots << " roots, block " << k;
        smallest = std::min(smallest, b.size());
        largest = std::max(largest, b.size());
        for (int r = b.first; r < b.end; ++r) ASSERT_EQ(reccl::core::blockOfRank(n, roots, r), k) << n << "/" << roots;
        next = b.end;
      }
      ASSERT_EQ(next, n);
      ASSERT_LE(largest - smallest, 1) << n << " ranks, " << roots << " roots";
    }
  const reccl::core::RankBlock big = reccl::core::rankBlock(reccl::core::kMaxRanks, reccl::core::kMaxRoots, 1023);
  EXPECT_EQ(big.end, reccl::core::kMaxRanks);
  EXPECT_EQ(reccl::core::blockOfRank(reccl::core::kMaxRanks, reccl::core::kMaxRoots, reccl::core::kMaxRanks - 1), 1023);
}

TEST(CclTopology, NicListSyntax) {
  auto f = core::parseNicFilter("rail0,rail1");
  EXPECT_TRUE(core::nicMatches(f, "rail0"));
  EXPECT_TRUE(core::nicMatches(f, "rail10"));  // prefix
  EXPECT_FALSE(core::nicMatches(f, "mgmt0"));
  f = core::parseNicFilter("^mgmt0,lo");
  EXPECT_FALSE(core::nicMatches(f, "lo"));
  EXPECT_FALSE(core::nicMatches(f, "mgmt0"));
  EXPECT_TRUE(core::nicMatches(f, "rail0"));
  f = core::parseNicFilter("=rail1");
  EXPECT_TRUE(core::nicMatches(f, "rail1"));
  EXPECT_FALSE(core::nicMatches(f, "rail10"));
  f = core::parseNicFilter("^=rail1");
  EXPECT_TRUE(core::nicMatches(f, "rail10"));
  EXPECT_FALSE(core::nicMatches(f, "rail1"));

  std::vector<core::NicInfo> all = {{"rail1", 3}, {"lo", 1}, {"mgmt0", 2}, {"rail0", 4}};
  auto pick = core::selectNics(all, "", "mgmt0");
  ASSERT_EQ(pick.size(), 2u);
  EXPECT_EQ(pick[0].name, "rail0");  // sorted: rails line up across hosts
  EXPECT_EQ(pick[1].name, "rail1");
  pick = core::selectNics({{"lo", 1}, {"eth0", 2}}, "", "eth0");
  ASSERT_EQ(pick.size(), 1u);
  EXPECT_EQ(pick[0].name, "eth0");
  pick = core::selectNics({{"lo", 1}}, "", "lo");
  ASSERT_EQ(pick.size(), 1u);
  pick = core::selectNics(all, "=rail1", "mgmt0");
  ASSERT_EQ(pick.size(), 1u);
  EXPECT_EQ(pick[0].name, "rail1");

  EXPECT_EQ(core::nicIndex(pick, "rail1"), 0);
  EXPECT_EQ(core::nicIndex(all, "rail0"), 3);
  EXPECT_EQ(core::nicIndex(all, "rail9"), -1);
}

TEST(CclTopology, HostsRailsAndChannels) {
  std::vector<core::RankInfo> t(4);
  for (int r = 0; r < 4; ++r) {
    t[r].rank = r;
    t[r].hostId = r < 2 ? "A" : "B";
    t[r].nics = {{"rail0", 1}, {"rail1", 2}};
  }
  auto topo = core::computeTopology(t, 3);
  EXPECT_EQ(topo.nhosts, 2);
  EXPECT_EQ(topo.localRank, 1);
  EXPECT_EQ(topo.localNranks, 2);
  EXPECT_EQ(topo.nrails, 2);
  EXPECT_EQ(topo.nchannels, 2);
  EXPECT_EQ(core::railFor(topo, 2, 0), 0);  // local rank 0 -> NIC 0
  EXPECT_EQ(core::railFor(topo, 3, 0), 1);  // local rank 1 -> NIC 1
  EXPECT_EQ(core::railFor(topo, 3, 1), 0);
  t[0].nchannels = 5;
  EXPECT_EQ(core::computeTopology(t, 0).nchannels, 5);
  // A home rail (the NCCL net plugin's per-NIC devices) moves that sender's channels, on both
  // ends' tables alike; one past the rails every rank has is not taken.
  t[2].homeRail = 1;
  t[3].homeRail = 0;
  for (int me : {0, 2}) {
    topo = core::computeTopology(t, me);
    EXPECT_EQ(core::railFor(topo, 2, 0), 1);
    EXPECT_EQ(core::railFor(topo, 2, 1), 0);
    EXPECT_EQ(core::railFor(topo, 3, 0), 0);
    EXPECT_EQ(core::railFor(topo, 1, 0), 1);  // none: its local rank's
  }
  // Rank 3 (local rank 1) with a third NIC as its home: past the 2 rails every rank has, so its
  // local rank's rail 1 (not 2 mod 2).
  t[3].nics.push_back({"rail2", 3});
  t[3].homeRail = 2;
  EXPECT_EQ(core::railFor(core::computeTopology(t, 0), 3, 0), 1);
  EXPECT_EQ(core::primaryRail(core::computeTopology(t, 0), 3), 1);
}

// Hosts are network namespaces (or containers) of a machine; the machine is the boot id, whose
// CPUs its ranks share.
TEST(CclTopology, RanksOnTheSameMachine) {
  std::vector<core::RankInfo> t(5);
  const char* ids[] = {"b1/h/net:1", "b1/h/net:2", "b2/h/net:1", "b1/g/net:3", "b3"};
  for (int r = 0; r < 5; ++r) {
    t[r].rank = r;
    t[r].hostId = ids[r];
  }
  EXPECT_EQ(core::computeTopology(t, 0).nhosts, 5);
  EXPECT_EQ(core::computeTopology(t, 0).machineNranks, 3);
  EXPECT_EQ(core::computeTopology(t, 2).machineNranks, 1);
  EXPECT_EQ(core::computeTopology(t, 4).machineNranks, 1);
}

// A rank asks for one channel thread when its share of the CPUs is below two, and the
// communicator runs the smallest any rank asks for, on every rank.
TEST(CclTopology, ChannelThreadsAreAgreedFromEveryRanksShareOfTheCpus) {
  auto rank = [](uint16_t cpus, uint16_t online, int32_t wanted) {
    core::RankInfo r;
    r.cpus = cpus;
    r.onlineCpus = online;
    r.channelThreads = wanted;
    return r;
  };
  EXPECT_EQ(core::rankChannelThreads(rank(2, 2, 0), 2), 1);    // the testbed: 2 ranks on 2 vCPUs
  EXPECT_EQ(core::rankChannelThreads(rank(2, 2, 0), 1), 0);    // one rank there: one per channel
  EXPECT_EQ(core::rankChannelThreads(rank(64, 64, 0), 8), 0);  // 8 CPUs each
  EXPECT_EQ(core::rankChannelThreads(rank(1, 64, 0), 8), 1);   // pinned to one CPU (or a 1-CPU quota)
  EXPECT_EQ(core::rankChannelThreads(rank(3, 3, 0), 2), 1);    // 1.5 CPUs each
  EXPECT_EQ(core::rankChannelThreads(rank(0, 0, 0), 4), 0);    // nothing known: as before
  EXPECT_EQ(core::rankChannelThreads(rank(0, 4, 0), 4), 1);    // only the online count known
  EXPECT_EQ(core::rankChannelThreads(rank(1, 1, 3), 4), 3);    // asked for

  // Four ranks on three machines; rank 2 is pinned to one CPU. Every rank agrees on one thread.
  std::vector<core::RankInfo> t = {rank(16, 16, 0), rank(16, 16, 0), rank(1, 16, 0), rank(16, 16, 0)};
  const char* ids[] = {"m1/a/net:1", "m1/b/net:2", "m2/a/net:1", "m3/a/net:1"};
  for (int r = 0; r < 4; ++r) {
    t[r].rank = r;
    t[r].hostId = ids[r];
    t[r].nics = {{"rail0", 1}, {"rail1", 2}};
    t[r].nchannels = 3;
  }
  for (int r = 0; r < 4; ++r) EXPECT_EQ(core::computeTopology(t, r).channelThreads, 1) << "rank " << r;
  t[2].cpus = 16;  // no one limits: one thread per channel
  for (int r = 0; r < 4; ++r) EXPECT_EQ(core::computeTopology(t, r).channelThreads, 3) << "rank " << r;
  t[1].channelThreads = 2;  // asked for by one rank: everyone
  t[3].channelThreads = 5;  // more than channels: no limit beyond them
  for (int r = 0; r < 4; ++r) EXPECT_EQ(core::computeTopology(t, r).channelThreads, 2) << "rank " << r;
  // 2 CPUs over the two ranks of machine m1: below two each.
  t[1].channelThreads = 0;
  t[0].onlineCpus = t[1].onlineCpus = 2;
  for (int r = 0; r < 4; ++r) EXPECT_EQ(core::computeTopology(t, r).channelThreads, 1) << "rank " << r;
}

TEST(CclTopology, MachineAndCgroupCpuQuota) {
  EXPECT_EQ(core::machineOf("boot/host/net:1"), "boot");
  EXPECT_EQ(core::machineOf("/host/net:1"), "/host/net:1");  // no boot id: the host is all we know
  EXPECT_EQ(core::machineOf("boot"), "boot");
  EXPECT_EQ(core::cpusFromCpuMax("max 100000"), 0);
  EXPECT_EQ(core::cpusFromCpuMax("max 100000\n"), 0);
  EXPECT_EQ(core::cpusFromCpuMax("200000 100000\n"), 2);
  EXPECT_EQ(core::cpusFromCpuMax("150000 100000"), 2);  // rounded up
  EXPECT_EQ(core::cpusFromCpuMax("50000 100000"), 1);
  EXPECT_EQ(core::cpusFromCpuMax("100000"), 0);
  EXPECT_EQ(core::cpusFromCpuMax("x 100000"), 0);
  EXPECT_EQ(core::cpusFromCpuMax("100000 0"), 0);
  EXPECT_EQ(core::cpusFromCpuMax(""), 0);
  EXPECT_GE(core::usableCpus(), 1);
}

TEST(CclLaunchEnv, Launchers) {
  auto run = [](std::map<std::string, std::string> m) {
    return core::parseLaunchEnv([m](const char* n) -> const char* {
      auto it = m.find(n);
      return it == m.end() ? nullptr : it->second.c_str();
    });
  };
  auto t = run({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->source, "torchrun");
  EXPECT_EQ(t->rank, 2);
  EXPECT_EQ(t->nranks, 4);
  EXPECT_EQ(t->rootPort, 29500);
  auto t2 = run({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(t->jobId, t2->jobId);  // every rank derives the same job id
  EXPECT_TRUE(core::isZeroKey(t->bootKey));  // and without a secret, no key
  auto o = run({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"RECCL_COMM_ID", "h:1234"}});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->source, "ompi");
  EXPECT_EQ(o->rootHost, "h");
  auto s = run({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->source, "slurm");
  auto p = run({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
  EXPECT_EQ(p->source, "pmi");
  EXPECT_FALSE(run({}).ok());
  EXPECT_FALSE(run({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}}).ok());
  EXPECT_FALSE(run({{"RANK", "0"}, {"WORLD_SIZE", "4"}}).ok());
  EXPECT_FALSE(run({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}}).ok());
}

// Ports over one shared block, as a shared-memory connection has them, without any transport.
TEST(CclChannel, SlotsAreReusedOnlyAfterAck) {
  auto mem = channel::ConnMemory::anonymous(2, 4096);
  ASSERT_TRUE(mem.ok());
  channel::ConnMemory view(mem->counters(), 0);  // non-owning alias for the receiver
  channel::PortEnv env;
  channel::SendPort tx({0, 1, 0}, std::move(mem).value(), &env);
  channel::RecvPort rx({1, 0, 0}, std::move(view), &env);
  channel::CollDesc desc{1, 10, -1, channel::CollKind::kAllReduce, 7, 0};
  auto soon = [] { return Deadline::afterMs(50); };
  for (int i = 0; i < 2; ++i) {
    auto s = tx.acquire(soon());
    ASSERT_TRUE(s.ok());
    (*s)[0] = std::byte(i + 1);
    ASSERT_TRUE(tx.post(1, desc).ok());
  }
  // Both slots hold unacked steps: a third acquire must wait (and time out here).
  EXPECT_EQ(tx.acquire(soon()).status().code(), Errc::kTimeout);
  auto r1 = rx.wait(soon(), desc);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ((*r1)[0], std::byte{1});
  ASSERT_TRUE(rx.release().ok());
  EXPECT_EQ(tx.acked(), 1u);
  auto s3 = tx.acquire(soon());
  ASSERT_TRUE(s3.ok());
  ASSERT_TRUE(tx.post(0, desc).ok());
  // Migration: a step resent on the new path is stamped with its epoch as it goes out (what the
  // socket and verbs paths do), and decodes with it, payload untouched.
  tx.setEpoch(2);
  EXPECT_EQ(channel::frameEpoch(tx.frame(2)), 1u);
  channel::stampFrameEpoch(const_cast<std::byte*>(tx.frame(2).data()), tx.epoch());
  auto f2 = channel::decodeStepHeader(tx.frame(2).first(channel::kStepHeaderBytes));
  ASSERT_TRUE(f2.ok());
  EXPECT_EQ(f2->epoch, 2u);
  EXPECT_EQ(f2->step, 2u);
  EXPECT_EQ(tx.frame(2)[channel::kStepHeaderBytes], std::byte{2});
  // Step 2 is still in its slot; the wrong descriptor is an error naming what differs.
  channel::CollDesc wrong = desc;
  wrong.count = 11;
  auto r2 = rx.wait(soon(), wrong);
  EXPECT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("count"), std::string::npos);
  EXPECT_TRUE(rx.failed());
  (void)view;
}

// A direct step's payload stays in the caller's memory (sent as a second piece) until someone
// needs the whole frame (a relay pipe, a migration's resend): then it is copied into its slot
// once, and the caller's memory no longer matters. waitAcked() waits for the receiver's ack.
TEST(CclChannel, DirectStepsStayInCallerMemoryUntilAFrameIsNeeded) {
  auto mem = channel::ConnMemory::anonymous(2, 4096);
  ASSERT_TRUE(mem.ok());
  channel::ConnMemory view(mem->counters(), 0);
  channel::PortEnv env;
  channel::SendPort tx({0, 1, 0}, std::move(mem).value(), &env);
  channel::RecvPort rx({1, 0, 0}, std::move(view), &env);
  channel::CollDesc desc{1, 10, -1, channel::CollKind::kAllReduce, 7, 0};
  auto soon = [] { return Deadline::afterMs(50); };
  EXPECT_FALSE(tx.sendsDirect());  // no path that sends pieces
  std::vector<std::byte> user(100, std::byte{7});
  ASSERT_TRUE(tx.acquire(soon()).ok());
  ASSERT_TRUE(tx.postDirect(user.data(), user.size(), desc).ok());
  EXPECT_EQ(tx.lastDirect(), 1u);
  auto p1 = tx.frameParts(1);
  EXPECT_EQ(p1.payload.data(), user.data());
  EXPECT_EQ(p1.payload.size(), 100u);
  auto h1 = channel::decodeStepHeader(p1.header);
  ASSERT_TRUE(h1.ok());
  EXPECT_EQ(h1->step, 1u);
  EXPECT_EQ(h1->bytes, 100u);
  EXPECT_EQ(h1->flags, channel::kStepFlagAckNow);  // its sender will wait for the ack
  // An ordinary step in the other slot keeps its payload right behind its header.
  auto s2 = tx.acquire(soon());
  ASSERT_TRUE(s2.ok());
  (*s2)[0] = std::byte{9};
  ASSERT_TRUE(tx.post(1, desc).ok());
  auto p2 = tx.frameParts(2);
  EXPECT_EQ(p2.payload.data(), p2.header.data() + channel::kStepHeaderBytes);
  EXPECT_EQ(channel::decodeStepHeader(p2.header)->flags, 0u);
  EXPECT_EQ(tx.lastDirect(), 1u);
  // The whole frame: the payload is copied into the slot, later reads come from there.
  auto f1 = tx.frame(1);
  ASSERT_EQ(f1.size(), channel::kStepHeaderBytes + 100);
  EXPECT_EQ(f1[channel::kStepHeaderBytes + 99], std::byte{7});
  user.assign(100, std::byte{1});
  EXPECT_EQ(tx.frameParts(1).payload.data(), f1.data() + channel::kStepHeaderBytes);
  EXPECT_EQ(tx.frame(1)[channel::kStepHeaderBytes], std::byte{7});
  // Not acked yet: the caller may not let its memory go.
  EXPECT_EQ(tx.waitAcked(1, soon()).code(), Errc::kTimeout);
  auto r1 = rx.wait(soon(), desc);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ((*r1)[0], std::byte{7});
  ASSERT_TRUE(rx.release().ok());
  EXPECT_TRUE(tx.waitAcked(1, soon()).ok());
}

// Direct-receive targets: a transport gets one only for the named step and size; a third
// target replaces the older of two.
TEST(CclChannel, DirectReceiveTargetsMatchStepAndSize) {
  auto mem = channel::ConnMemory::anonymous(2, 4096);
  ASSERT_TRUE(mem.ok());
  channel::PortEnv env;
  channel::RecvPort rx({1, 0, 0}, std::move(mem).value(), &env);
  std::vector<std::byte> a(100), b(200), c(100);
  EXPECT_EQ(rx.directTarget(3, 100), nullptr);
  rx.expectDirect(3, a.data(), 100);
  rx.expectDirect(5, b.data(), 200);
  EXPECT_EQ(rx.directTarget(3, 100), a.data());
  EXPECT_EQ(rx.directTarget(3, 99), nullptr);
  EXPECT_EQ(rx.directTarget(4, 100), nullptr);
  EXPECT_EQ(rx.directTarget(5, 200), b.data());
  rx.expectDirect(7, c.data(), 100);
  EXPECT_EQ(rx.directTarget(3, 100), nullptr);
  EXPECT_EQ(rx.directTarget(5, 200), b.data());
  EXPECT_EQ(rx.directTarget(7, 100), c.data());
  EXPECT_FALSE(rx.landedDirect(c.data()));  // nothing waited for
}

TEST(CclChannel, AbortWakesWaiters) {
  auto mem = channel::ConnMemory::anonymous(2, 4096);
  ASSERT_TRUE(mem.ok());
  channel::PortEnv env;
  channel::RecvPort rx({1, 0, 0}, std::move(mem).value(), &env);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    env.aborted = true;
    rx.wakeAll();
  });
  auto start = Clock::now();
  auto r = rx.wait(Deadline::afterMs(10000), {});
  t.join();
  EXPECT_EQ(r.status().code(), Errc::kAborted);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
