#include "reccl/detector/rdma_loss.h"

#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "reccl/common/deadline.h"
#include "reccl/common/log.h"

namespace reccl::detector {
uint64_t rdmaLossSampleNs(const RdmaLossParams& p) noexcept {
  return std::clamp<uint64_t>(p.windowNs / 10, 10'000'000, 100'000'000);
}

std::optional<RdmaLossJudge::Verdict> RdmaLossJudge::judge(const Sample& base, const Sample& now, bool pooled) const {
  const uint64_t n = now.errors - base.errors;
  if (n < p_.threshold || n == 0) return std::nullopt;
  Verdict v;
  v.errors = static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX));
  v.pooled = pooled;
  if (now.packets) {
    // No packet at all in the span while errors came: everything sent was lost.
    const uint64_t pk = *now.packets - *base.packets;
    const uint64_t ppm = pk == 0 ? 1'000'000 : std::min<uint64_t>(n * 1'000'000 / pk, 1'000'000);
    if (ppm < p_.ratePpm) return std::nullopt;
    v.ppm = static_cast<uint32_t>(ppm);
  }
  return v;
}

std::optional<RdmaLossJudge::Verdict> RdmaLossJudge::feed(uint64_t nowNs, uint64_t errors,
                                                          std::optional<uint64_t> packets) {
  if (!window_.empty()) {
    const Sample& last = window_.back();
    if (errors < last.errors || packets.has_value() != last.packets.has_value() ||
        (packets && *packets < *last.packets))
      window_.clear();
  }
  window_.push_back({nowNs, errors, packets});
  const bool pool = p_.poolWindows > 1 && p_.ratePpm > 0 && packets.has_value();
  const uint64_t keepNs = pool ? p_.windowNs * p_.poolWindows : p_.windowNs;
  while (window_.size() > 1 && nowNs - window_.front().ns > keepNs) window_.pop_front();
  if (window_.size() < 2) return std::nullopt;
  const Sample& now = window_.back();
  // The window's base is its oldest sample within windowNs (`now` at least); the pool's, the
  // oldest kept. The pool judges only a window under the count.
  const Sample& base =
      *std::find_if(window_.begin(), window_.end(), [&](const Sample& s) { return nowNs - s.ns <= p_.windowNs; });
  std::optional<Verdict> v = judge(base, now, false);
  if (!v && pool && now.errors - base.errors < p_.threshold) v = judge(window_.front(), now, true);
  if (!v) return std::nullopt;
  if (declared_ && nowNs - lastVerdictNs_ < kMinIntervalNs) return std::nullopt;
  declared_ = true;
  lastVerdictNs_ = nowNs;
  const Sample keep = now;
  window_.clear();
  window_.push_back(keep);
  return v;
}

Result<std::unique_ptr<RdmaLossSource>> RdmaLossSource::open(const std::string& root, uint32_t ownNetnsIno,
                                                             RdmaLossParams params) {
  struct stat st{};
  if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status(Errc::kUnsupported, "rdma counters: no " + root + " (no RDMA stack on this machine)");
  std::unique_ptr<RdmaLossSource> s(new RdmaLossSource(root, ownNetnsIno, params));
  s->timer_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  s->ready_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  s->stop_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!s->timer_ || !s->ready_ || !s->stop_) return Status::FromErrno(errno, "rdma counters: timerfd/eventfd");
  const uint64_t ns = rdmaLossSampleNs(params);
  itimerspec its{};
  its.it_interval.tv_sec = static_cast<time_t>(ns / 1'000'000'000ull);
  its.it_interval.tv_nsec = static_cast<long>(ns % 1'000'000'000ull);
  its.it_value = its.it_interval;
  if (timerfd_settime(s->timer_.get(), 0, &its, nullptr) != 0)
    return Status::FromErrno(errno, "rdma counters: timerfd_settime");
  s->relist();
  s->thread_ = std::thread([p = s.get()] { p->run(); });
  return s;
}

RdmaLossSource::~RdmaLossSource() {
  uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

void RdmaLossSource::setWatched(std::set<LinkKey> keys) {
  std::lock_guard lk(mu_);
  watched_ = std::move(keys);
}

void RdmaLossSource::take(std::vector<LinkSignal>& out) {
  uint64_t v;
  (void)!::read(ready_.get(), &v, sizeof(v));
  std::lock_guard lk(mu_);
  for (auto& s : pending_) out.push_back(std::move(s));
  pending_.clear();
}

std::vector<std::string> RdmaLossSource::ports() const {
  std::lock_guard lk(mu_);
  return portNames_;
}

std::vector<RdmaPortReport> RdmaLossSource::reports() const {
  std::lock_guard lk(mu_);
  return reports_;
}

void RdmaLossSource::relist() {
  std::vector<Port> next;
  for (auto& c : listRdmaLossPorts(root_)) {
    // A port listed before keeps its judgement.
    auto it = std::find_if(ports_.begin(), ports_.end(), [&](const Port& p) {
      return p.counters.dev == c.dev && p.counters.port == c.port && p.counters.netdev == c.netdev;
    });
    next.push_back(it != ports_.end() ? std::move(*it) : Port{std::move(c), RdmaLossJudge(params_), std::nullopt});
  }
  ports_ = std::move(next);
  std::vector<std::string> names;
  std::vector<RdmaPortReport> reports;
  for (const auto& p : ports_) {
    names.push_back(p.counters.dev + "/" + std::to_string(p.counters.port) + " (" + p.counters.netdev + ")");
    if (p.last) reports.push_back(*p.last);
  }
  std::lock_guard lk(mu_);
  portNames_ = std::move(names);
  reports_ = std::move(reports);
}

void RdmaLossSource::run() {
  pthread_setname_np(pthread_self(), "reccl-rdmaloss");
  uint64_t listedNs = monotonicNs();
  for (;;) {
    pollfd pf[2] = {{stop_.get(), POLLIN, 0}, {timer_.get(), POLLIN, 0}};
    if (::poll(pf, 2, -1) < 0 && errno != EINTR) {
      RECCL_WARN(kLogDetector, "rdma counters: poll: %s; sampling stops", strerror(errno));
      return;
    }
    if (pf[0].revents) return;
    if (!(pf[1].revents & POLLIN)) continue;
    uint64_t expirations;
    (void)!::read(timer_.get(), &expirations, sizeof(expirations));
    const uint64_t now = monotonicNs();
    if (now - listedNs >= params_.relistNs) {
      relist();
      listedNs = now;
    }
    sample(now);
  }
}

void RdmaLossSource::sample(uint64_t nowNs) {
  std::set<LinkKey> watched;
  {
    std::lock_guard lk(mu_);
    if (watched_.empty()) return;
    watched = watched_;
  }
  std::vector<LinkSignal> out;
  bool read = false;
  for (auto& p : ports_) {
    unsigned ifindex = if_nametoindex(p.counters.netdev.c_str());
    if (ifindex == 0 || !watched.count(LinkKey{netnsIno_, ifindex})) continue;
    auto errors = readCounterSum(p.counters.lossFiles);
    if (!errors) continue;
    // Packets when the port counts them readably; a 32-bit PMA counter stuck at its maximum
    // (ports without the extended counters) counts nothing: the count alone then.
    std::optional<uint64_t> packets;
    if (!p.counters.packetFiles.empty()) {
      uint64_t sum = 0;
      bool ok = true;
      for (const auto& f : p.counters.packetFiles) {
        auto v = readCounterSum({f});
        if (!v || *v == UINT32_MAX) ok = false;
        else sum += *v;
      }
      if (ok) packets = sum;
    }
    auto v = p.judge.feed(nowNs, *errors, packets);
    if (!p.last) p.last = RdmaPortReport{p.counters.dev, p.counters.port, p.counters.netdev, 0, std::nullopt, 0};
    p.last->sequenceErrors = *errors;
    p.last->packets = packets;
    read = true;
    if (!v) continue;
    p.last->verdicts++;
    RECCL_INFO(kLogDetector, "rdma counters: %s/%u (%s) degraded: %u sequence errors, %u per million packets, %s",
               p.counters.dev.c_str(), p.counters.port, p.counters.netdev.c_str(), v->errors, v->ppm,
               v->pooled ? "over the pool's windows" : "in one window");
    LinkSignal s;
    s.kind = RECCL_LINK_KIND_DEGRADED;
    s.source = RECCL_LINK_SRC_RDMA_COUNTERS;
    s.tsNs = nowNs;
    s.link = {netnsIno_, ifindex};
    s.ifname = p.counters.netdev;
    s.value = (uint64_t(v->ppm) << 32) | v->errors;
    out.push_back(std::move(s));
  }
  if (read) {
    std::vector<RdmaPortReport> reports;
    for (const auto& p : ports_)
      if (p.last) reports.push_back(*p.last);
    std::lock_guard lk(mu_);
    reports_ = std::move(reports);
  }
  if (out.empty()) return;
  {
    std::lock_guard lk(mu_);
    for (auto& s : out) pending_.push_back(std::move(s));
  }
  uint64_t one = 1;
  (void)!::write(ready_.get(), &one, sizeof(one));
}

}  // namespace reccl::detector
