#include "verbs_lab_util.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>

#include "transport/socket_util.h"
#include "transport/verbs/rail_map.h"

namespace reccl::lab {

int envInt(const char* name, int dflt) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

Result<Peer*> Peer::get() {
  static std::unique_ptr<Peer> peer;
  if (peer) return peer.get();
  auto p = std::make_unique<Peer>();
  p->rank_ = envInt("RANK", 0);
  const char* master = getenv("MASTER_ADDR");
  if (!master) return Status(Errc::kNotFound, "MASTER_ADDR not set (the lab exports it)");
  RECCL_ASSIGN_OR_RETURN(uint32_t addr, transport::parseIpv4(master));
  auto port = static_cast<uint16_t>(envInt("MASTER_PORT", 29500));
  Deadline dl = Deadline::afterMs(60'000);
  if (p->rank_ == 0) {
    transport::Endpoint bound;
    RECCL_ASSIGN_OR_RETURN(UniqueFd l, transport::listenTcp(addr, port, &bound));
    RECCL_ASSIGN_OR_RETURN(p->fd_, transport::acceptTcp(l.get(), dl));
  } else {
    RECCL_ASSIGN_OR_RETURN(p->fd_, transport::connectTcp({addr, port}, 0, "", dl));
  }
  peer = std::move(p);
  return peer.get();
}

Status Peer::send(std::span<const std::byte> b) { return transport::sendAll(fd_.get(), b, Deadline::afterMs(30'000)); }

Status Peer::recv(std::span<std::byte> b, int timeoutMs) {
  return transport::recvAll(fd_.get(), b, Deadline::afterMs(timeoutMs));
}

Result<std::vector<std::byte>> Peer::exchange(std::span<const std::byte> mine, int timeoutMs) {
  RECCL_TRY(send(mine));
  std::vector<std::byte> theirs(mine.size());
  RECCL_TRY(recv(theirs, timeoutMs));
  return theirs;
}

Result<uint64_t> Peer::exchangeU64(uint64_t mine, int timeoutMs) {
  RECCL_ASSIGN_OR_RETURN(auto b, exchange(std::as_bytes(std::span(&mine, 1)), timeoutMs));
  uint64_t theirs;
  std::memcpy(&theirs, b.data(), sizeof(theirs));
  return theirs;
}

Status Peer::barrier(uint64_t tag, int timeoutMs) {
  RECCL_ASSIGN_OR_RETURN(uint64_t theirs, exchangeU64(tag, timeoutMs));
  if (theirs != tag)
    return Status(Errc::kProtocol, "barrier " + std::to_string(tag) + " met the peer at " + std::to_string(theirs));
  return Status::Ok();
}

int rdmaResources(const std::string& kind, const std::string& dev) {
  FILE* f = popen(("rdma resource show " + kind + " 2>/dev/null").c_str(), "r");
  if (!f) return -1;
  const std::string mine = " pid " + std::to_string(getpid()) + " ";
  int n = 0;
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    std::string l(line);
    // "link rxe_rail0/1 lqpn 17 ..." (qp) or "dev rxe_rail0 mrn 3 ..." (mr)
    if (l.find(mine) != std::string::npos &&
        (l.find(" " + dev + "/") != std::string::npos || l.find(" " + dev + " ") != std::string::npos))
      ++n;
  }
  return pclose(f) == 0 ? n : -1;
}

Result<std::vector<std::unique_ptr<RailDevice>>> openRails(int timeoutMs) {
  std::vector<std::string> names;
  std::istringstream in(getenv("LAB_RAIL_NICS") ? getenv("LAB_RAIL_NICS") : "");
  for (std::string n; in >> n;) names.push_back(n);
  if (names.empty()) return Status(Errc::kNotFound, "LAB_RAIL_NICS is empty: boot the lab with --rails");
  std::vector<std::unique_ptr<RailDevice>> rails;
  Deadline dl = Deadline::afterMs(timeoutMs);
  for (size_t k = 0; k < names.size(); ++k) {
    // The IPv4 GID appears after the address, and the port turns ACTIVE with the carrier.
    for (;;) {
      RECCL_ASSIGN_OR_RETURN(RailNic nic, railNicByName(names[k]));
      RECCL_ASSIGN_OR_RETURN(RdmaInventory inv, readRdmaInventory());
      auto port = mapRail(inv, nic);
      if (port.ok() && port->active && port->gid == ipv4MappedGid(nic.ipv4)) {
        RECCL_ASSIGN_OR_RETURN(auto dev, RailDevice::open(static_cast<int>(k), nic, inv));
        rails.push_back(std::move(dev));
        break;
      }
      if (dl.expired())
        return Status(Errc::kTimeout, names[k] + ": no active RoCEv2 port with its address: " +
                                          (port.ok() ? port->state + " " + gidString(port->gid) : port.status().message()));
      usleep(20'000);
    }
  }
  return rails;
}

size_t stepBytes(uint64_t step, size_t chunk) noexcept { return 1 + (step * 2654435761u) % chunk; }

namespace {
uint64_t mix(uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t seedOf(int rank, int stream, uint64_t step) noexcept {
  return mix((uint64_t(rank) << 56) ^ (uint64_t(stream) << 48) ^ step);
}
}  // namespace

void fillStep(std::span<std::byte> out, int rank, int stream, uint64_t step) noexcept {
  const uint64_t seed = seedOf(rank, stream, step);
  for (size_t off = 0, k = 0; off < out.size(); off += 8, ++k) {
    uint64_t v = mix(seed + k);
    std::memcpy(out.data() + off, &v, std::min<size_t>(8, out.size() - off));
  }
}

long firstWrongByte(std::span<const std::byte> got, int rank, int stream, uint64_t step) noexcept {
  const uint64_t seed = seedOf(rank, stream, step);
  for (size_t off = 0, k = 0; off < got.size(); off += 8, ++k) {
    uint64_t v = mix(seed + k);
    size_t n = std::min<size_t>(8, got.size() - off);
    if (std::memcmp(got.data() + off, &v, n) != 0)
      for (size_t i = 0; i < n; ++i)
        if (got[off + i] != reinterpret_cast<const std::byte*>(&v)[i]) return static_cast<long>(off + i);
  }
  return -1;
}

channel::CollDesc stepDesc(uint64_t step, size_t bytes) noexcept {
  return {step, bytes, -1, channel::CollKind::kSendRecv, 0, 0};
}

namespace {
std::vector<RailDevice*> railPtrs(std::span<const std::unique_ptr<RailDevice>> rails) {
  std::vector<RailDevice*> v;
  for (const auto& r : rails) v.push_back(r.get());
  return v;
}

struct QpPair {
  std::unique_ptr<RcQp> send, recv;
  ConnInfo sendInfo, recvInfo;
};

// New QPs for `d` on `rail` and this end's records (the epoch the paths will run at).
Result<QpPair> newQps(Duplex& d, RailDevice& dev, uint32_t epoch) {
  QpPair q;
  RECCL_ASSIGN_OR_RETURN(q.send, RcQp::create(dev, depthForSlots(d.send->slots())));
  RECCL_ASSIGN_OR_RETURN(q.recv, RcQp::create(dev, depthForSlots(d.recv->slots())));
  RECCL_ASSIGN_OR_RETURN(q.sendInfo, d.sendReg->describe(dev.rail(), epoch));
  RECCL_ASSIGN_OR_RETURN(q.recvInfo, d.recvReg->describe(dev.rail(), epoch));
  q.send->fillLocal(q.sendInfo);
  q.recv->fillLocal(q.recvInfo);
  return q;
}

void put(std::vector<std::byte>& out, const ConnInfo& c) {
  std::array<std::byte, kConnInfoBytes> b;
  encodeConnInfo(c, b);
  out.insert(out.end(), b.begin(), b.end());
}

// Connects both QPs to the peer's records (`theirs`: its sender's, then its receiver's) and
// makes the paths.
struct NewPaths {
  std::unique_ptr<VerbsSendPath> send;
  std::unique_ptr<VerbsRecvPath> recv;
};
Result<NewPaths> connectPair(Duplex& d, QpPair q, std::span<const std::byte> theirs, VerbsPathOptions opts,
                             uint64_t sentBefore, uint64_t ackedBefore) {
  RECCL_ASSIGN_OR_RETURN(ConnInfo theirSend, decodeConnInfo(theirs.first(kConnInfoBytes)));
  RECCL_ASSIGN_OR_RETURN(ConnInfo theirRecv, decodeConnInfo(theirs.subspan(kConnInfoBytes, kConnInfoBytes)));
  RECCL_TRY(checkPeerInfo(q.sendInfo, theirRecv));
  RECCL_TRY(checkPeerInfo(q.recvInfo, theirSend));
  RECCL_TRY(q.send->connect(theirRecv, d.settings));
  RECCL_TRY(q.recv->connect(theirSend, d.settings));
  const std::string tag = "verbs rail" + std::to_string(d.rail) + " stream " + std::to_string(d.stream);
  NewPaths p;
  RECCL_ASSIGN_OR_RETURN(p.send, VerbsSendPath::create(d.send.get(), std::move(q.send), d.sendReg.get(), theirRecv,
                                                       tag + " send", opts, sentBefore));
  RECCL_ASSIGN_OR_RETURN(p.recv, VerbsRecvPath::create(d.recv.get(), std::move(q.recv), d.recvReg.get(), theirSend,
                                                       tag + " recv", opts, ackedBefore));
  return p;
}
}  // namespace

Result<std::vector<std::unique_ptr<Duplex>>> makeDuplexes(std::span<const DuplexSpec> specs,
                                                          std::span<const std::unique_ptr<RailDevice>> rails,
                                                          Peer& peer, VerbsProgress& engine, channel::PortEnv* env,
                                                          VerbsPathOptions opts, uint32_t slots, size_t chunk) {
  std::vector<std::unique_ptr<Duplex>> out;
  std::vector<QpPair> qps;
  std::vector<std::byte> mine;
  const std::vector<RailDevice*> all = railPtrs(rails);
  for (size_t i = 0; i < specs.size(); ++i) {
    auto d = std::make_unique<Duplex>();
    d->stream = static_cast<int>(i);
    d->rail = specs[i].rail;
    d->settings = specs[i].settings;
    const channel::PortId id{peer.rank(), 1 - peer.rank(), d->stream};
    RECCL_ASSIGN_OR_RETURN(channel::ConnMemory sm, channel::ConnMemory::anonymous(slots, chunk));
    RECCL_ASSIGN_OR_RETURN(channel::ConnMemory rm, channel::ConnMemory::anonymous(slots, chunk));
    d->send = std::make_unique<channel::SendPort>(id, std::move(sm), env);
    d->recv = std::make_unique<channel::RecvPort>(id, std::move(rm), env);
    RECCL_ASSIGN_OR_RETURN(d->sendReg, ConnRegistration::create(all, d->send->memory(), ConnRole::kSender));
    RECCL_ASSIGN_OR_RETURN(d->recvReg, ConnRegistration::create(all, d->recv->memory(), ConnRole::kReceiver));
    RECCL_ASSIGN_OR_RETURN(QpPair q, newQps(*d, *rails[d->rail], d->send->epoch()));
    put(mine, q.sendInfo);
    put(mine, q.recvInfo);
    qps.push_back(std::move(q));
    out.push_back(std::move(d));
  }
  RECCL_ASSIGN_OR_RETURN(auto theirs, peer.exchange(mine));
  for (size_t i = 0; i < out.size(); ++i) {
    Duplex& d = *out[i];
    RECCL_ASSIGN_OR_RETURN(NewPaths p, connectPair(d, std::move(qps[i]), std::span(theirs).subspan(2 * i * kConnInfoBytes),
                                                   opts, UINT64_MAX, UINT64_MAX));
    d.sendPath = p.send.get();
    d.recvPath = p.recv.get();
    d.send->setPath(std::move(p.send));
    d.recv->setPath(std::move(p.recv));
  }
  // The peer's QPs are in RTR before anything is written to them (a write to a QP still in INIT
  // is dropped and waits a whole retry timeout).
  RECCL_TRY(peer.barrier(0x5eed0000 + specs.size()));
  for (auto& d : out) {
    RECCL_TRY(engine.add(d->sendPath));
    RECCL_TRY(engine.add(d->recvPath));
  }
  return out;
}

EngineDetach::~EngineDetach() {
  if (!engine || !duplexes) return;
  for (auto& d : *duplexes) {
    engine->remove(d->sendPath);
    engine->remove(d->recvPath);
  }
}

Status moveDuplex(Duplex& d, int rail, std::span<const std::unique_ptr<RailDevice>> rails, Peer& peer,
                  VerbsProgress& engine, VerbsPathOptions opts, ResendFrom from, uint64_t* resumedNs) {
  for (VerbsPath* old : {static_cast<VerbsPath*>(d.sendPath), static_cast<VerbsPath*>(d.recvPath)}) {
    engine.remove(old);
    old->shutdown();  // ERR at once; destroying the QP can take long (rxe: up to ~1 s): retireOld()
    d.oldPaths.push_back(old);
  }
  // The receive end's old QP flushed (out of the engine above): nothing of the peer's old QP
  // can land here any more once both ends pass the barrier.
  RECCL_TRY(d.oldPaths.back()->stopLanding(Deadline::afterMs(10'000)));
  RECCL_TRY(peer.barrier(0x30fe0000 + d.stream));
  const uint32_t epoch = d.send->epoch() + 1;
  d.rail = rail;
  RECCL_ASSIGN_OR_RETURN(QpPair q, newQps(d, *rails[rail], epoch));
  std::vector<std::byte> mine;
  put(mine, q.sendInfo);
  put(mine, q.recvInfo);
  // The handshake: this end's receiver's applied step, and where this end's sender resends from.
  // Nothing moves between the barrier and the resend, so `received` stays as it is now.
  const uint64_t words[2] = {d.recv->applied(), from == ResendFrom::kOwnAcked ? d.send->acked() : 0};
  mine.resize(mine.size() + sizeof(words));
  std::memcpy(mine.data() + 2 * kConnInfoBytes, words, sizeof(words));
  RECCL_ASSIGN_OR_RETURN(auto theirs, peer.exchange(mine));
  uint64_t their[2];
  std::memcpy(their, theirs.data() + 2 * kConnInfoBytes, sizeof(their));
  const uint64_t peerApplied = their[0];  // the receiver of this end's send connection
  const uint64_t sentBefore = from == ResendFrom::kOwnAcked ? words[1] : peerApplied;
  // What the peer resends that this end already has, it drops as duplicates.
  const uint64_t peerFrom = from == ResendFrom::kOwnAcked ? their[1] : words[0];
  d.expectedDuplicates += d.recv->received() - std::min(d.recv->received(), peerFrom);
  d.send->setEpoch(epoch);
  d.recv->setEpoch(epoch);
  RECCL_ASSIGN_OR_RETURN(NewPaths p, connectPair(d, std::move(q), theirs, opts, sentBefore, 0));
  d.sendPath = p.send.get();
  d.recvPath = p.recv.get();
  d.send->setPath(std::move(p.send));  // the ports keep the old paths (retired) until they go
  d.recv->setPath(std::move(p.recv));
  RECCL_TRY(peer.barrier(0x30ff0000 + d.stream));
  RECCL_TRY(engine.add(d.sendPath));
  RECCL_TRY(engine.add(d.recvPath));
  d.sendPath->notifyPosted();  // the resend from the slots
  if (resumedNs) *resumedNs = monotonicNs();
  return Status::Ok();
}

Status retireOld(Duplex& d) {
  for (VerbsPath* old : d.oldPaths) RECCL_TRY(old->retire(Deadline::afterMs(10'000)));
  d.oldPaths.clear();
  return Status::Ok();
}

Streams::Streams(std::span<const std::unique_ptr<Duplex>> duplexes, int rank, uint64_t steps, int waitMs) {
  for (const auto& dp : duplexes) {
    Duplex* d = dp.get();
    threads_.emplace_back([d, rank, steps, waitMs] {
      const size_t chunk = d->send->chunkBytes();
      for (uint64_t s = 1; s <= steps; ++s) {
        auto slot = d->send->acquire(Deadline::afterMs(waitMs));
        if (!slot.ok()) {
          d->sendResult = slot.status().Wrap("step " + std::to_string(s));
          return;
        }
        const size_t n = stepBytes(s, chunk);
        fillStep(slot->first(n), rank, d->stream, s);
        if (Status st = d->send->post(n, stepDesc(s, n)); !st.ok()) {
          d->sendResult = st;
          return;
        }
        d->posted.store(s, std::memory_order_release);
      }
    });
    threads_.emplace_back([d, rank, steps, waitMs] {
      const size_t chunk = d->recv->chunkBytes();
      for (uint64_t s = 1; s <= steps; ++s) {
        const size_t n = stepBytes(s, chunk);
        auto got = d->recv->wait(Deadline::afterMs(waitMs), stepDesc(s, n));
        if (!got.ok()) {
          d->recvResult = got.status().Wrap("step " + std::to_string(s));
          return;
        }
        long bad = got->size() == n ? firstWrongByte(*got, 1 - rank, d->stream, s) : 0;
        if (bad >= 0) {
          d->recvResult = Status(Errc::kProtocol, "stream " + std::to_string(d->stream) + " step " + std::to_string(s) +
                                                      ": " + std::to_string(got->size()) + " bytes, want " +
                                                      std::to_string(n) + ", first wrong byte " + std::to_string(bad));
          return;
        }
        if (Status st = d->recv->release(); !st.ok()) {
          d->recvResult = st;
          return;
        }
        d->verified.store(s, std::memory_order_release);
      }
    });
  }
}

void Streams::join() {
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void VerbsLab::SetUp() {
  if (!getenv("RECCL_TEST_LAB")) GTEST_SKIP() << "runs in the stock-kernel lab: tools/lab/lab.sh (ctest -L lab)";
  if (envInt("WORLD_SIZE", 1) != 2) GTEST_SKIP() << "needs two lab VMs (lab.sh --vms 2 --rails 2)";
  auto p = Peer::get();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  peer_ = *p;
  auto r = openRails();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  rails_ = std::move(*r);
  ASSERT_GE(rails_.size(), 2u) << "needs two rails";
  auto e = VerbsProgress::start("verbs-progress");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  engine_ = std::move(*e);
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  ASSERT_TRUE(peer_->barrier(std::hash<std::string>{}(std::string(info->name()))).ok())
      << "the other VM runs another test";
}

void VerbsLab::closeAll(std::vector<std::unique_ptr<Duplex>>& ds) {
  ASSERT_TRUE(peer_->barrier(0xc105e).ok());  // the peer has everything it waits for
  { EngineDetach detach{engine_.get(), &ds}; }
  engine_.reset();
  std::vector<std::unique_ptr<ConnRegistration>> regs;
  for (auto& d : ds) {
    regs.push_back(std::move(d->sendReg));
    regs.push_back(std::move(d->recvReg));
  }
  ds.clear();  // the ports: their paths, QPs, CQs and slot memory
  for (auto& r : regs) {
    Status s = r->close();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  for (auto& r : rails_) {
    EXPECT_EQ(rdmaResources("qp", r->port().device), 0) << r->port().device;
    EXPECT_EQ(rdmaResources("mr", r->port().device), 0) << r->port().device;
  }
  for (auto& r : rails_) {
    Status s = r->close();
    EXPECT_TRUE(s.ok()) << s.ToString() << " (a registration or QP was left behind)";
  }
}

}  // namespace reccl::lab
