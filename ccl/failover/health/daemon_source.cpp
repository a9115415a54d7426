#include "failover/health/daemon_source.h"

#include <unistd.h>

#include <algorithm>
#include <map>

#ifdef RECCL_HAVE_DETECTOR
#include <nlohmann/json.hpp>

#include "reccl/common/deadline.h"
#include "reccl/detector/detector_client.h"
#include "reccl/detector/netns.h"
#endif

namespace reccl::failover {

#ifdef RECCL_HAVE_DETECTOR
namespace {
struct Watched {
  int rail = 0;
  detector::LinkKey key;
  uint32_t slot = RECCL_LINK_NO_SLOT;
  uint64_t seenEpoch = 0;
};
}  // namespace

struct DaemonSource::Impl {
  std::unique_ptr<detector::DetectorClient> client;
  std::unique_ptr<detector::MappedLinkState> map;
  std::map<detector::LinkKey, Watched> watched;
  std::string sources;
  int timeoutMs = 200;
};

DaemonSource::DaemonSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DaemonSource::~DaemonSource() = default;

Result<std::unique_ptr<DaemonSource>> DaemonSource::open(const std::string& socketPath,
                                                         const std::vector<RailNic>& nics, int timeoutMs) {
  auto impl = std::make_unique<Impl>();
  RECCL_ASSIGN_OR_RETURN(impl->client, detector::DetectorClient::connect(socketPath, timeoutMs));
  impl->timeoutMs = timeoutMs;
  nlohmann::json hello = nlohmann::json::parse(impl->client->hello(), nullptr, false);
  if (hello.is_object() && hello.contains("sources") && hello["sources"].is_array())
    for (const auto& s : hello["sources"])
      if (s.is_object() && s.contains("active") && s["active"].is_boolean() && s["active"].get<bool>())
        impl->sources += std::string(impl->sources.empty() ? "" : ",") +
                         (s.contains("name") && s["name"].is_string() ? s["name"].get<std::string>() : "?");
  RECCL_ASSIGN_OR_RETURN(uint32_t ownIno, detector::ownNetnsIno());
  // The daemon runs in its own namespace; it enters ours through our nsfs file. (Same pid
  // namespace assumed: checked below by the inode it resolved.)
  std::string ns = "/proc/" + std::to_string(getpid()) + "/ns/net";
  for (const auto& n : nics) {
    RECCL_ASSIGN_OR_RETURN(detector::WatchedLink w, impl->client->watch(detector::WatchSpec{ns, n.ifname}));
    if (w.key.netnsIno != ownIno)
      return Status(Errc::kUnsupported, "detectord: watch of " + n.ifname + " resolved netns " +
                                            std::to_string(w.key.netnsIno) + ", ours is " + std::to_string(ownIno) +
                                            " (daemon in another pid namespace?)");
    impl->watched[w.key] = Watched{n.rail, w.key, w.slot, 0};
  }
  // The one-load health check; without it events alone still work.
  auto m = impl->client->mapLinkState();
  if (m.ok()) {
    impl->map = std::move(m).value();
    for (auto& [k, w] : impl->watched) w.seenEpoch = impl->map->epoch(w.slot);
  }
  return std::unique_ptr<DaemonSource>(new DaemonSource(std::move(impl)));
}

int DaemonSource::fd() const noexcept { return impl_->client->fd(); }
const std::string& DaemonSource::sources() const noexcept { return impl_->sources; }
bool DaemonSource::mapped() const noexcept { return impl_->map != nullptr; }

Status DaemonSource::receive(std::vector<RailSignal>* out) {
  std::vector<detector::LinkEvent> events;
  // Events that arrived before an error are turned into signals first, then the error is returned.
  Status st = impl_->client->receive(0, &events);
  for (const auto& e : events) {
    auto it = impl_->watched.find(e.link);
    if (it == impl_->watched.end()) continue;  // another job's link (the daemon filters; be sure)
    RailSignal s;
    s.rail = it->second.rail;
    s.source = detector::sourceName(e.source);
    switch (e.type) {
      case detector::LinkEventType::kLinkDown:
        s.kind = RailSignal::Kind::kDown;
        s.signalNs = e.signalNs;
        break;
      case detector::LinkEventType::kLinkDegraded:
        s.kind = RailSignal::Kind::kDegraded;
        s.signalNs = e.signalNs;
        break;
      case detector::LinkEventType::kLinkUp:  // after the daemon's hold-down and flap damping
        s.kind = RailSignal::Kind::kUp;
        s.signalNs = e.emitNs;
        break;
    }
    out->push_back(std::move(s));
  }
  return st;
}

Status DaemonSource::keepAlive(int pingMs) {
  if (pingMs <= 0) return Status::Ok();
  return impl_->client->keepAlive(pingMs, std::max(2 * pingMs, impl_->timeoutMs));
}

std::vector<int> DaemonSource::railsDownInMap() const {
  std::vector<int> down;
  if (!impl_->map) return down;
  for (const auto& [k, w] : impl_->watched) {
    if (w.slot >= RECCL_LINK_MAX_SLOTS) continue;
    const reccl_link_slot& sl = impl_->map->slots()[w.slot];
    uint64_t st = __atomic_load_n(&sl.state, __ATOMIC_ACQUIRE);
    if (sl.ifindex != k.ifindex || sl.netns_ino != k.netnsIno || !(st & RECCL_LINK_STATE_VALID)) continue;
    if ((st & RECCL_LINK_STATE_HEALTHY) != RECCL_LINK_STATE_HEALTHY) down.push_back(w.rail);
  }
  return down;
}

void DaemonSource::checkLinkState(std::vector<RailSignal>* out) {
  if (!impl_->map) return;
  for (auto& [k, w] : impl_->watched) {
    if (w.slot >= RECCL_LINK_MAX_SLOTS) continue;
    uint64_t e = impl_->map->epoch(w.slot);
    if (e == w.seenEpoch) continue;
    w.seenEpoch = e;
    const reccl_link_slot& sl = impl_->map->slots()[w.slot];
    uint64_t st = __atomic_load_n(&sl.state, __ATOMIC_ACQUIRE);
    // A restarted daemon may have given the slot to another link.
    if (sl.ifindex != k.ifindex || sl.netns_ino != k.netnsIno || !(st & RECCL_LINK_STATE_VALID)) continue;
    if ((st & RECCL_LINK_STATE_HEALTHY) == RECCL_LINK_STATE_HEALTHY) continue;
    uint64_t now = monotonicNs();
    uint64_t at = __atomic_load_n(&sl.last_change_ns, __ATOMIC_RELAXED);
    out->push_back(RailSignal{RailSignal::Kind::kDown, w.rail, at && at <= now ? at : now, "link-state"});
  }
}

Result<std::vector<std::pair<int, bool>>> DaemonSource::railStates() {
  RECCL_ASSIGN_OR_RETURN(std::string text, impl_->client->statusJson());
  try {
    return railStatesOf(text);
  } catch (const std::exception& e) {  // a field of the wrong type
    return Status(Errc::kProtocol, std::string("detectord: malformed status: ") + e.what());
  }
}

Result<std::vector<std::pair<int, bool>>> DaemonSource::railStatesOf(const std::string& text) const {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("links") || !j["links"].is_array())
    return Status(Errc::kProtocol, "detectord: status without links");
  std::vector<std::pair<int, bool>> out;
  for (const auto& l : j["links"]) {
    if (!l.is_object()) continue;
    detector::LinkKey k{l.value("netns_ino", 0u), l.value("ifindex", 0u)};
    auto it = impl_->watched.find(k);
    if (it == impl_->watched.end()) continue;
    out.emplace_back(it->second.rail, l.value("state", std::string()) == "up");
  }
  return out;
}

#else   // built without the detector

struct DaemonSource::Impl {
  std::string sources;
};
DaemonSource::DaemonSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DaemonSource::~DaemonSource() = default;
Result<std::unique_ptr<DaemonSource>> DaemonSource::open(const std::string&, const std::vector<RailNic>&, int) {
  return Status(Errc::kUnsupported, "built without the link detector");
}
int DaemonSource::fd() const noexcept { return -1; }
Status DaemonSource::receive(std::vector<RailSignal>*) { return Status(Errc::kUnsupported, "no detector"); }
Status DaemonSource::keepAlive(int) { return Status::Ok(); }
std::vector<int> DaemonSource::railsDownInMap() const { return {}; }
void DaemonSource::checkLinkState(std::vector<RailSignal>*) {}
Result<std::vector<std::pair<int, bool>>> DaemonSource::railStates() {
  return Status(Errc::kUnsupported, "no detector");
}
const std::string& DaemonSource::sources() const noexcept { return impl_->sources; }
bool DaemonSource::mapped() const noexcept { return false; }
#endif

}  // namespace reccl::failover
