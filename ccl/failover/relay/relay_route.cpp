// RelayRoute (relay_route.h): the origin's side of a relayed connection.
#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstring>
#include <thread>

#include "core/handshake.h"
#include "failover/context.h"
#include "failover/migration/migration.h"
#include "failover/relay/relay_control.h"
#include "failover/relay/relay_paths.h"
#include "failover/relay/relay_route.h"
#include "failover/relay/relay_wire.h"
#include "reccl/common/log.h"

namespace reccl::failover {
namespace {

constexpr int64_t kAttemptMs = 1000;

// The pipe to a relay rank as a link: the handshake runs through it, and it becomes a relay path.
class RelayPipeLink final : public transport::Link {
 public:
  explicit RelayPipeLink(RelayLink link) : link_(std::move(link)) {}
  transport::ByteIo io(Deadline dl) override {
    RelayLink* lp = &link_;
    int ctrlFd = link_.ctrl.get();
    return {[lp, ctrlFd, dl](std::span<const std::byte> b) { return lp->pipe.writeAll(b, ctrlFd, dl); },
            [lp, ctrlFd, dl](std::span<std::byte> b) { return lp->pipe.readAll(b, ctrlFd, dl); }};
  }
  // Never a standby: the idle-link calls have nothing to look at.
  bool alive() const noexcept override { return static_cast<bool>(link_.ctrl); }
  int waitFd() const noexcept override { return link_.ctrl.get(); }
  bool hasInput() const noexcept override { return false; }
  void closeNow() noexcept override { link_.ctrl.reset(); }
  // The relay forwards bytes: the peer's end is a byte-stream path whatever its transport.
  bool needsStreamPeer() const noexcept override { return true; }
  std::unique_ptr<channel::Path> makePath(channel::PortBase& port, bool isSender, uint64_t after,
                                          std::string desc) override {
    if (isSender)
      return std::make_unique<RelaySendPath>(std::move(link_), static_cast<channel::SendPort*>(&port), std::move(desc),
                                             after);
    return std::make_unique<RelayRecvPath>(std::move(link_), static_cast<channel::RecvPort*>(&port), std::move(desc));
  }

 private:
  RelayLink link_;
};

}  // namespace

RelayRoute::~RelayRoute() { stop(); }

Status RelayRoute::start() {
  const core::FailoverHost& host = ctx_.host;
  const core::Topology& topo = host.topology();
  // Every rank with a same-host peer serves relays whatever its own route: the origin decides.
  if (topo.localNranks < 2) return Status::Ok();
  const int rank = ctx_.cfg.rank;
  RelayServerConfig cfg;
  cfg.rank = rank;
  cfg.nranks = host.nranks();
  cfg.key = host.key();
  cfg.commId = host.commId();
  cfg.pid = host.rankTable()[rank].pid;
  cfg.hostOf = topo.hostOf;
  for (int r = 0; r < ctx_.cfg.nrails && static_cast<size_t>(r) < host.nics().size(); ++r) {
    cfg.nicName.push_back(host.nics()[r].name);
    cfg.nicAddr.push_back(host.nics()[r].addr);
  }
  for (const auto& ri : host.rankTable()) {
    std::vector<uint32_t> addrs;
    for (const auto& n : ri.nics) addrs.push_back(n.addr);
    cfg.peerNic.push_back(std::move(addrs));
    cfg.peerPort.push_back(ri.dataPort);
  }
  FailoverContext* ctx = &ctx_;
  cfg.railUp = [ctx](int r) { return ctx->rails.up(r); };
  cfg.railsUp = [ctx] { return ctx->rails.upMask(); };
  cfg.broken = [ctx] { return ctx->broken(); };
  auto srv = RelayServer::create(std::move(cfg));
  // Without a relay server this rank cannot forward for others; its own failovers still work.
  if (!srv.ok())
    RECCL_WARN(kLogFailover, "rank %d: relay server unavailable: %s", rank, srv.status().message().c_str());
  else
    server_ = std::move(srv).value();
  return Status::Ok();
}

void RelayRoute::stop() noexcept {
  if (stopped_) return;
  stopped_ = true;
  for (auto& c : ctx_.conns.snapshot())
    if (c->relayVia.load() >= 0)
      if (channel::Path* p = c->port->path()) p->shutdown();
  if (server_) server_->stop(std::min<int64_t>(10000, std::max<int64_t>(ctx_.cfg.timeoutMs, 1000)));
}

void RelayRoute::railDown(int rail) {
  if (server_) server_->breakRail(rail);
}

bool RelayRoute::wanted(const Conn& c, const Job& j) {
  const std::string& route = ctx_.cfg.route;
  const core::Topology& topo = ctx_.host.topology();
  const int nrails = ctx_.cfg.nrails;
  if (route == "direct" || topo.localNranks < 2) return false;
  // relay: when this rank's own NIC failed under the connection (or its relay did). A stall with
  // the rail healthy here points at the far end, which a same-host NIC would not avoid.
  if (route == "relay") return c.relayVia.load() >= 0 || j.fromRail < 0 || !ctx_.rails.up(j.fromRail);
  if (!ctx_.cfg.nicAffinity) return false;
  // auto under NIC affinity: this rank may use its own NIC (core::primaryRail) and the rails its
  // connections use fault-free; relay only when none of those reaches the peer.
  uint64_t affine = 1ull << core::primaryRail(topo, ctx_.cfg.rank);
  for (auto& o : ctx_.conns.snapshot())
    if (o->preferredRail >= 0 && o->preferredRail < nrails) affine |= 1ull << o->preferredRail;
  uint64_t usable = affine & ctx_.rails.upMask() & ctx_.rails.peerRails(c.peer);
  if (j.fromRail >= 0 && j.fromRail < nrails) usable &= ~(1ull << j.fromRail);
  return usable == 0;
}

std::vector<std::pair<int, int>> RelayRoute::candidates(const Conn& c, const Job& j) {
  std::vector<std::pair<int, int>> out;
  const auto& t = ctx_.host.topology();
  const int rank = ctx_.cfg.rank;
  const int nrails = ctx_.cfg.nrails;
  uint64_t peerUp = ctx_.rails.peerRails(c.peer);
  uint64_t hereUp = ctx_.rails.upMask();
  for (int r = 0; r < ctx_.host.nranks(); ++r) {
    if (r == rank || r == c.peer || t.hostOf[r] != t.hostOf[rank]) continue;
    // The relay's own NICs first (the rails its channels use), then any other rail.
    std::vector<int> rails;
    for (int ch = 0; ch < t.nchannels; ++ch) rails.push_back(core::railFor(t, r, ch));
    for (int k = 0; k < nrails; ++k) rails.push_back(k);
    std::vector<bool> seen(nrails, false);
    for (int rail : rails) {
      if (rail < 0 || rail >= nrails || seen[rail]) continue;
      seen[rail] = true;
      if (rail == j.fromRail || !((peerUp >> rail) & 1u)) continue;
      // Same-host ranks usually share the host's NICs: a rail down here is down for them too.
      if (!((hereUp >> rail) & 1u)) continue;
      if (static_cast<size_t>(rail) >= ctx_.host.rankTable()[c.peer].nics.size()) continue;
      out.emplace_back(r, rail);
    }
  }
  return out;
}

RelayRoute::Outcome RelayRoute::first(Conn& c, const Job& j, Deadline deadline) {
  if (!wanted(c, j)) return Outcome::kFallBack;
  const int rank = ctx_.cfg.rank;
  auto cands = candidates(c, j);
  if (cands.empty()) {
    RECCL_WARN(kLogFailover, "rank %d: %s: no same-host rank can relay (RECCL_FAILOVER_ROUTE=%s); direct route", rank,
               connName(c.id).c_str(), ctx_.cfg.route.c_str());
    return Outcome::kFallBack;
  }
  for (auto [via, rail] : cands) {
    for (int tries = 0; tries < 20 && !deadline.expired() && !ctx_.stopping() && !ctx_.broken(); ++tries) {
      Moved moved;
      Status err;
      Attempt a = attempt(c, via, rail, j, deadline, &err, &moved);
      if (a == Attempt::kDone) {
        ctx_.counters.relayMigrations.fetch_add(1);
        ctx_.migration->log(c, j, moved, rail, true, monotonicNs());
        RECCL_WARN(kLogFailover, "rank %d: %s relayed via rank %d (its rail %d, %s)", rank, connName(c.id).c_str(),
                   via, rail, ctx_.host.rankTable()[via].nics[rail].name.c_str());
        return Outcome::kDone;
      }
      if (a == Attempt::kStale) return Outcome::kStale;
      if (a == Attempt::kPeerFailed) return Outcome::kFallBack;  // the direct route hears the same and fails at once
      if (a == Attempt::kNotReady) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      RECCL_INFO(kLogFailover, "rank %d: %s: relay via rank %d rail %d failed: %s", rank, connName(c.id).c_str(), via,
                 rail, err.message().c_str());
      break;
    }
    if (deadline.expired() || ctx_.stopping() || ctx_.broken()) break;
  }
  RECCL_WARN(kLogFailover, "rank %d: %s: no relay worked; trying the direct route", rank, connName(c.id).c_str());
  return Outcome::kFallBack;
}

Attempt RelayRoute::attempt(Conn& c, int via, int rail, const Job& j, Deadline deadline, Status* err, Moved* moved) {
  const core::FailoverHost& host = ctx_.host;
  const core::Key& key = host.key();
  int peer = c.peer;
  const Deadline dl = deadline.within(kAttemptMs);
  // The pipe holds a full slot window each way, so the relay never throttles the sender.
  size_t ringBytes = static_cast<size_t>(host.slots()) * (host.chunkBytes() + channel::kStepHeaderBytes);
  auto pipeR = RelayPipe::create(std::min<size_t>(ringBytes, 64u << 20));
  if (!pipeR.ok()) {
    *err = pipeR.status();
    return Attempt::kFailed;
  }
  RelayLink link;
  link.pipe = std::move(pipeR).value();
  link.via = via;

  // 1. Ask the relay to connect to the peer on `rail`.
  std::array<std::byte, kRelayOpenBytes> om;
  RelayOpen open;
  open.conn = c.id;
  open.peer = peer;
  open.rail = static_cast<uint16_t>(rail);
  encodeRelayOpen(open, om);
  int fds[3] = {link.pipe.memFd(), link.pipe.originWakeFd(), link.pipe.relayWakeFd()};
  core::Session session;
  auto ctrl = openRelayControl(RelayServer::socketName(host.rankTable()[via].pid, host.commId(), via),
                               dataHello(ctx_, via, c.id.channel, 1), key, om, fds, dl, &session);
  if (!ctrl.ok()) {
    *err = ctrl.status();
    return Attempt::kFailed;
  }
  link.ctrl = std::move(ctrl).value();
  auto answer = readRelayAnswer(link.ctrl.get(), key, session, via, dl);
  if (!answer.ok()) {
    *err = answer.status();
    return Attempt::kFailed;
  }
  if (answer->reply.status != RelayStatus::kOk || !answer->proven) {
    *err = Status(Errc::kLinkFailure, "relay rank " + std::to_string(via) + ": " + relayStatusName(answer->reply.status));
    return Attempt::kFailed;
  }

  // 2. The ordinary migration handshake with the peer, through the pipe (the direct route's
  // code: same hello and request, same reply handling, same commit, with the pipe as the path).
  Timeline tl;
  Attempt a = ctx_.migration->handshake(c, rail, j, true, std::make_unique<RelayPipeLink>(std::move(link)), via, dl,
                                        err, moved, &tl);
  if (a == Attempt::kFailed) *err = err->Wrap("migration handshake via relay rank " + std::to_string(via));
  return a;
}

}  // namespace reccl::failover
