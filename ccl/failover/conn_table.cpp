#include "failover/conn_table.h"

#include "core/topology.h"
#include "failover/context.h"
#include "failover/monitor.h"

namespace reccl::failover {

bool ConnTable::refresh() {
  // Ports are only ever added (until the communicator goes, after failover stopped), so their
  // count is a generation: unchanged since the last full walk, nothing is new and nothing is
  // walked. This runs at every monitor wake-up and for every unknown connection.
  size_t n = 0;
  bool whole = ctx_.host.portCount(&n);
  if (whole && n == portsSeen_.load(std::memory_order_acquire)) return false;
  // Never waits for the port maps: a lazy connect holds them while it connects.
  core::FailoverHost::PortWalk walk = ctx_.host.ports();
  const int rank = ctx_.cfg.rank;
  bool added = false;
  {
    std::lock_guard lk(mu_);
    for (const auto& p : walk.ports) {
      const auto ch = static_cast<uint32_t>(p.channel);
      ConnId id = p.isSender ? ConnId{rank, p.peer, ch} : ConnId{p.peer, rank, ch};
      if (conns_.count(id)) continue;
      auto c = std::make_shared<Conn>();
      c->id = id;
      c->role = p.isSender ? Role::kSender : Role::kReceiver;
      c->peer = p.peer;
      c->port = p.port;
      c->preferredRail = core::railFor(ctx_.host.topology(), id.sender, p.channel);
      c->rail = p.rail >= 0 && p.rail < ctx_.cfg.nrails ? p.rail : c->preferredRail;
      c->highest = p.port->epoch();
      if (channel::Path* path = p.port->path()) ctx_.paths.watch(*path, ctx_.cfg.stallMs);
      conns_.emplace(id, std::move(c));
      added = true;
    }
  }
  // Every port seen (shared-memory ones are never tracked): the next wake-ups skip the walk.
  if (walk.whole) portsSeen_.store(walk.total, std::memory_order_release);
  if (added) {
    // Found on another thread (a path failure, a migration hello, a job): the monitor's stall
    // check and standby upkeep start on the new connections now, not at its next deadline.
    added_.store(true, std::memory_order_release);
    if (ctx_.monitor && !ctx_.monitor->onThread()) ctx_.monitor->wake();
  }
  return added;
}

std::shared_ptr<Conn> ConnTable::find(const ConnId& id) {
  {
    std::lock_guard lk(mu_);
    if (auto it = conns_.find(id); it != conns_.end()) return it->second;
  }
  refresh();
  std::lock_guard lk(mu_);
  if (auto it = conns_.find(id); it != conns_.end()) return it->second;
  return nullptr;
}

std::vector<std::shared_ptr<Conn>> ConnTable::snapshot() {
  std::lock_guard lk(mu_);
  std::vector<std::shared_ptr<Conn>> out;
  out.reserve(conns_.size());
  for (auto& [k, c] : conns_) out.push_back(c);
  return out;
}

bool ConnTable::empty() {
  std::lock_guard lk(mu_);
  return conns_.empty();
}

std::vector<int> ConnTable::loads(std::optional<Role> role) {
  const int nrails = ctx_.cfg.nrails;
  std::vector<int> load(nrails, 0);
  for (auto& c : snapshot()) {
    int r = c->rail.load();
    if ((!role || c->role == *role) && r >= 0 && r < nrails) ++load[r];
  }
  return load;
}

}  // namespace reccl::failover
