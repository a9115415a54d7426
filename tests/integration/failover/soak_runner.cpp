#include "soak_runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>

#include "failover_job.h"
#include "reccl/inject/fault_drop.h"
#include "reccl/inject/link_control.h"
#include "reccl/inject/target.h"
#include "reccl/testbed/testbed_layout.h"
#include "testbed_fixture.h"

namespace reccl::test::soak {

double KillRecord::maxMs() const { return errorMs.empty() ? 0 : *std::max_element(errorMs.begin(), errorMs.end()); }

namespace {

using failover::Clock;
using failover::Job;
using inject::ResolvedTarget;

long long nsSince(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - t0).count();
}
Clock::time_point fromMonoNs(long long ns) { return Clock::time_point(std::chrono::nanoseconds(ns)); }

// One cable: the host NIC, its switch port, and the drop program on the switch port.
struct Cable {
  ResolvedTarget nic, port;
  std::optional<inject::FaultDropDevice> drop;
  int dropSlot = -1;
  int fault = -1;  // the fault on it now, -1: none
};

enum class Op { kHostAdmin, kSwitchAdmin, kCarrier, kDrop };

// One timed change of a cable; `on` = the fault is on (link down, carrier off, drop rule set).
struct Action {
  int host = 0, rail = 0;
  Op op = Op::kHostAdmin;
  bool on = false;
  double rate = 0;
  int endsFault = -1;  // the fault this action ends
};

struct RankView {
  bool started = false;
  long long progressNs = 0;  // the latest "progress" line's at_ns
  long long iters = 0;
  unsigned rails = 0;
  long long failedNs = 0;  // "failed rank R at_ns"
};

class Runner {
 public:
  Runner(const testbed::TestbedState& tb, const SoakOptions& o)
      : tb_(tb), o_(o), ranks_(o.shape.hosts * o.shape.ranksPerHost) {}
  ~Runner();
  SoakReport run();
  SoakReport allRailsDown(FaultKind kind, int host);

 private:
  bool prepare();
  bool startJob();
  bool pump(Clock::time_point until, const std::function<bool()>& done = {});
  void onLine(const std::string& line);
  bool apply(const Action& a);
  void startFault(const FaultStep& s);
  bool restoreAll();
  bool drain();
  bool killRank(const FaultStep& s);
  bool everyRankErrors(Clock::time_point t, int exempt, const std::string& what, KillRecord* k);
  bool stopJob();
  bool fail(const std::string& why);
  // The late ranks' own last lines (progress reports left out), for a failure message whose job
  // output may be cut short where it is read: what each was doing when the others errored.
  std::string lateRankLines(const std::vector<int>& ranks);
  void log(nlohmann::json ev);
  std::string env() const;

  const testbed::TestbedState& tb_;
  const SoakOptions& o_;
  const int ranks_;
  SoakReport rep_;
  std::vector<std::vector<Cable>> cables_;  // [host][rail]
  inject::LinkControl links_;
  std::multimap<Clock::time_point, Action> pending_;
  std::unique_ptr<Job> job_;
  size_t cursor_ = 0;
  std::vector<RankView> view_;
  bool jobEnding_ = false;  // a kill or the end: errors and the job's end are expected
  Clock::time_point t0_ = Clock::now();
  Clock::time_point deadline_;
  Clock::time_point lastRestore_ = Clock::now();
  std::deque<std::string> recent_;  // the latest events, for a failure message
  std::ofstream log_;
  int guardFd_ = -1, guardPid_ = -1;
  const FaultStep* current_ = nullptr;
};

Runner::~Runner() {
  if (job_) {
    for (auto& [rank, pid] : job_->workerRanks()) kill(pid, SIGKILL);
    job_->wait();
  }
  (void)restoreAll();
  for (auto& host : cables_)
    for (Cable& c : host) (void)inject::detachFaultDrop(c.port.netns, c.port.dev);
  if (guardFd_ >= 0) close(guardFd_);
  if (guardPid_ > 0) waitpid(guardPid_, nullptr, 0);
}

std::string Runner::env() const {
  const SoakDeadlines& d = o_.deadlines;
  const char* more = getenv("FAILOVER_TEST_ENV");
  // Hold-down, damping and the gray clear time short, so that rails come back within a phase's
  // drain: the soak is about many transitions, not the default pacing.
  return "RECCL_TIMEOUT_MS=" + std::to_string(d.timeoutMs) + " RECCL_STALL_TIMEOUT_MS=" + std::to_string(d.stallMs) +
         " RECCL_FAILOVER_TIMEOUT_MS=" + std::to_string(d.failoverMs) +
         " RECCL_HOLDDOWN_MS=300 RECCL_DAMPING_HALFLIFE_MS=1000 RECCL_DEGRADED_CLEAR_MS=2000"
         " WORKER_COLL=all WORKER_COUNT=65536 WORKER_SECONDS=0.001 WORKER_PROGRESS_MS=500 " +
         o_.workerEnv + " " + (more ? more : "");
}

void Runner::log(nlohmann::json ev) {
  ev["t_ms"] = static_cast<double>(nsSince(t0_, Clock::now())) / 1e6;
  std::string line = ev.dump();
  recent_.push_back(line);
  if (recent_.size() > 30) recent_.pop_front();
  if (log_.is_open()) log_ << line << "\n" << std::flush;
}

std::string Runner::lateRankLines(const std::vector<int>& ranks) {
  if (!job_ || ranks.empty()) return "";
  constexpr size_t kLines = 25;
  const std::string text = job_->text();
  std::string out;
  for (int r : ranks) {
    const std::string prefix = "[rank " + std::to_string(r) + "] ";
    std::deque<std::string> last;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(prefix, 0) != 0 || line.find("] progress rank") != std::string::npos) continue;
      last.push_back(line);
      if (last.size() > kLines) last.pop_front();
    }
    out += "\nrank " + std::to_string(r) + "'s last lines:";
    for (auto& l : last) out += "\n  " + l;
  }
  return out;
}

bool Runner::fail(const std::string& why) {
  if (!rep_.ok) return false;
  rep_.ok = false;
  std::ostringstream m;
  m << "soak failed: " << why << "\nseed " << o_.spec.seed << " (replay: " << o_.replay << ")";
  if (current_) m << "\nlatest fault: " << describe(*current_);
  m << "\nrecent events:\n";
  for (auto& e : recent_) m << "  " << e << "\n";
  if (job_) {
    std::string text = job_->text();
    if (!o_.logPath.empty()) {
      std::string path = o_.logPath + ".job" + std::to_string(rep_.jobs) + ".txt";
      std::ofstream(path) << text;
      m << "the job's output: " << path << "\n";
    }
    size_t from = text.size() > 12000 ? text.find('\n', text.size() - 12000) : 0;
    m << "the job's output (tail):\n" << text.substr(from == std::string::npos ? 0 : from);
  }
  rep_.failure = m.str();
  log({{"event", "failure"}, {"why", why}});
  return false;
}

bool Runner::prepare() {
  if (!o_.logPath.empty()) log_.open(o_.logPath, std::ios::trunc);
  cables_.resize(static_cast<size_t>(o_.shape.hosts));
  for (int h = 0; h < o_.shape.hosts; ++h)
    for (int r = 0; r < o_.shape.rails; ++r) {
      Cable c;
      auto nic = inject::resolveTarget({tb_.hosts.at(static_cast<size_t>(h)).netns, testbed::railDev(r)}, false);
      auto port = inject::resolveTarget({tb_.fabricNetns, testbed::switchRailPort(h, r)}, false);
      if (!nic.ok() || !port.ok())
        return fail("resolve h" + std::to_string(h) + " rail" + std::to_string(r) + ": " +
                    (nic.ok() ? port.status() : nic.status()).ToString());
      c.nic = *nic;
      c.port = *port;
      cables_[static_cast<size_t>(h)].push_back(std::move(c));
    }
  // Before the first attach: should this process die, the guard takes the drop programs off.
  std::vector<ResolvedTarget> ports;
  for (auto& host : cables_)
    for (Cable& c : host) ports.push_back(c.port);
  guardFd_ = startExitGuard(
      [ports] {
        for (auto& p : ports) (void)inject::detachFaultDrop(p.netns, p.dev);
      },
      &guardPid_);
  if (guardFd_ < 0) return fail("could not start the guard process");
  bool gray = o_.shape.kinds.empty() ||
              std::find(o_.shape.kinds.begin(), o_.shape.kinds.end(), FaultKind::kGray) != o_.shape.kinds.end();
  if (gray)
    for (auto& host : cables_)
      for (Cable& c : host) {
        auto dev = inject::FaultDropDevice::openOrAttach(c.port);
        if (!dev.ok()) return fail("attach the drop program to " + c.port.toString() + ": " + dev.status().ToString());
        c.drop.emplace(std::move(*dev));
      }
  return true;
}

bool Runner::apply(const Action& a) {
  Cable& c = cables_[static_cast<size_t>(a.host)][static_cast<size_t>(a.rail)];
  Status st = Status::Ok();
  switch (a.op) {
    case Op::kHostAdmin: st = links_.setAdminUp(c.nic, !a.on); break;
    case Op::kSwitchAdmin: st = links_.setAdminUp(c.port, !a.on); break;
    case Op::kCarrier: st = links_.setCarrier(c.nic, !a.on); break;
    case Op::kDrop:
      if (a.on) {
        inject::DropRule rule;
        rule.rate = a.rate;
        auto slot = c.drop->upsertRule(rule);
        if (slot.ok())
          c.dropSlot = *slot;
        else
          st = slot.status();
      } else if (c.dropSlot >= 0) {
        st = c.drop->clearSlot(c.dropSlot);
        c.dropSlot = -1;
      }
      break;
  }
  if (!st.ok())
    return fail("inject on h" + std::to_string(a.host) + " rail" + std::to_string(a.rail) + ": " + st.ToString());
  if (a.endsFault >= 0) {
    c.fault = -1;
    lastRestore_ = Clock::now();
    log({{"event", "fault-end"}, {"fault", a.endsFault}});
  }
  return true;
}

void Runner::startFault(const FaultStep& s) {
  auto now = Clock::now();
  auto at = [&](int ms) { return now + std::chrono::milliseconds(ms); };
  Action a{s.host, s.rail, Op::kHostAdmin, true, 0, -1};
  switch (s.kind) {
    case FaultKind::kHostLink: break;
    case FaultKind::kSwitchLink: a.op = Op::kSwitchAdmin; break;
    case FaultKind::kCarrierShort:
    case FaultKind::kCarrierHeld: a.op = Op::kCarrier; break;
    case FaultKind::kGray:
      a.op = Op::kDrop;
      a.rate = s.dropRate;
      break;
    case FaultKind::kFlap:
      a.op = s.flapVia == FlapVia::kHostAdmin     ? Op::kHostAdmin
             : s.flapVia == FlapVia::kSwitchAdmin ? Op::kSwitchAdmin
                                                  : Op::kCarrier;
      ++rep_.flapsVia[static_cast<size_t>(s.flapVia)];
      break;
  }
  cables_[static_cast<size_t>(s.host)][static_cast<size_t>(s.rail)].fault = s.index;
  int cycles = s.kind == FaultKind::kFlap ? s.flapCycles : 1;
  int period = s.kind == FaultKind::kFlap ? s.flapPeriodMs : 2 * s.durationMs;
  for (int k = 0; k < cycles; ++k) {
    Action down = a, up = a;
    up.on = false;
    up.endsFault = k + 1 == cycles ? s.index : -1;
    pending_.emplace(at(k * period), down);
    pending_.emplace(at(k * period + period / 2), up);
  }
  ++rep_.faultsPlayed;
  ++rep_.perKind[static_cast<size_t>(s.kind)];
  log({{"event", "fault"}, {"fault", s.index}, {"what", describe(s)}});
}

// Every cable back to healthy at once: drop rule off, both ends admin up, carrier on.
bool Runner::restoreAll() {
  pending_.clear();
  bool ok = true;
  for (int h = 0; h < static_cast<int>(cables_.size()); ++h)
    for (int r = 0; r < static_cast<int>(cables_[static_cast<size_t>(h)].size()); ++r) {
      Cable& c = cables_[static_cast<size_t>(h)][static_cast<size_t>(r)];
      if (c.fault < 0 && c.dropSlot < 0) continue;
      for (Op op : {Op::kDrop, Op::kSwitchAdmin, Op::kHostAdmin, Op::kCarrier}) {
        if (op == Op::kCarrier && !o_.shape.tapNics) continue;
        if (op == Op::kDrop && !c.drop) continue;
        ok = apply(Action{h, r, op, false, 0, -1}) && ok;
      }
      c.fault = -1;
    }
  lastRestore_ = Clock::now();
  return ok;
}

void Runner::onLine(const std::string& line) {
  static const std::regex progress("progress rank ([0-9]+) iters ([0-9]+) rails ([0-9]+) at_ns ([0-9]+)");
  static const std::regex started("started rank ([0-9]+)");
  static const std::regex failed("failed rank ([0-9]+) at_ns ([0-9]+)");
  static const std::regex counters(
      "(done|stats) rank [0-9]+ iters ([0-9]+) secs \\S+ failovers ([0-9]+) failbacks "
      "([0-9]+) resent ([0-9]+) .* max_iter_us ([0-9]+)");
  std::smatch m;
  if (line.find("progress rank") != std::string::npos && std::regex_search(line, m, progress)) {
    RankView& v = view_.at(std::stoul(m[1]));
    v.iters = std::stoll(m[2]);
    v.rails = static_cast<unsigned>(std::stoul(m[3]));
    v.progressNs = std::stoll(m[4]);
  } else if (line.find("started rank") != std::string::npos && std::regex_search(line, m, started)) {
    view_.at(std::stoul(m[1])).started = true;
  } else if (line.find("failed rank") != std::string::npos && std::regex_search(line, m, failed)) {
    view_.at(std::stoul(m[1])).failedNs = std::stoll(m[2]);
    if (!jobEnding_) fail("rank " + m[1].str() + " failed under faults that leave a rail up: " + line);
  } else if ((line.find("done rank") != std::string::npos || line.find("stats rank") != std::string::npos) &&
             std::regex_search(line, m, counters)) {
    rep_.iterations += std::stoull(m[2]);
    rep_.failovers += std::stoull(m[3]);
    rep_.failbacks += std::stoull(m[4]);
    rep_.bytesResent += std::stoull(m[5]);
    rep_.maxIterMs = std::max(rep_.maxIterMs, std::stod(m[6]) / 1000);
  } else if (line.find(": wrong ") != std::string::npos) {
    fail("wrong result: " + line);
  } else if (line.find("failover of rank") != std::string::npos && line.find("reason degraded") != std::string::npos) {
    ++rep_.degradedFailovers;
  } else if (line.find(" relayed via rank ") != std::string::npos) {
    ++rep_.relayedMoves;
  }
}

// Runs due fault actions and reads the job's lines until `until` or `done()`; false on a failure.
bool Runner::pump(Clock::time_point until, const std::function<bool()>& done) {
  const auto hangNs = std::chrono::nanoseconds(std::chrono::milliseconds(2LL * o_.deadlines.timeoutMs + 10000)).count();
  for (;;) {
    auto now = Clock::now();
    while (!pending_.empty() && pending_.begin()->first <= now) {
      Action a = pending_.begin()->second;
      pending_.erase(pending_.begin());
      if (!apply(a)) return false;
    }
    if (job_)
      for (auto& [t, line] : job_->linesFrom(&cursor_)) onLine(line);
    if (!rep_.ok) return false;
    if (job_ && !jobEnding_) {
      if (job_->finished()) return fail("the job ended by itself");
      long long nowNs = nsSince(Clock::time_point{}, now);
      for (int r = 0; r < ranks_; ++r)
        if (view_[static_cast<size_t>(r)].progressNs > 0 && nowNs - view_[static_cast<size_t>(r)].progressNs > hangNs)
          return fail("rank " + std::to_string(r) + " made no progress for " +
                      std::to_string((nowNs - view_[static_cast<size_t>(r)].progressNs) / 1000000) + " ms (a hang)");
    }
    if (now > deadline_) return fail("the soak overran its deadline");
    if (done && done()) return true;
    if (now >= until) return !done;
    auto next = std::min(until, now + std::chrono::milliseconds(5));
    if (!pending_.empty()) next = std::min(next, pending_.begin()->first);
    std::this_thread::sleep_until(next);
  }
}

bool Runner::startJob() {
  view_.assign(static_cast<size_t>(ranks_), RankView{});
  cursor_ = 0;
  jobEnding_ = false;
  int timeoutSec =
      static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(deadline_ - Clock::now()).count()) + 60;
  job_ = std::make_unique<Job>(tb_.spec.name, env(), timeoutSec, o_.shape.ranksPerHost);
  ++rep_.jobs;
  log({{"event", "job-start"}, {"job", rep_.jobs}});
  // Every rank past its warm-up with every rail up before the first fault (or only connected).
  bool up = pump(Clock::now() + std::chrono::seconds(90), [&] {
    for (auto& v : view_)
      if (!v.started ||
          (o_.warmupIters > 0 && (v.iters < o_.warmupIters || v.rails != static_cast<unsigned>(o_.shape.rails))))
        return false;
    return true;
  });
  return up || fail("the job did not start, or not past its warm-up with every rail up, within 90 s");
}

// Waits until every fault is over and then every rank reports all its rails up.
bool Runner::drain() {
  auto t = Clock::now();
  if (!pump(t + std::chrono::seconds(30), [&] { return pending_.empty(); }))
    return fail("the phase's faults did not end in time");
  // A report well after the last restore: the rank had time to see the fault before it says up.
  auto after = nsSince(Clock::time_point{}, lastRestore_ + std::chrono::milliseconds(200));
  bool back = pump(Clock::now() + std::chrono::seconds(30), [&] {
    for (auto& v : view_)
      if (v.progressNs <= after || v.rails != static_cast<unsigned>(o_.shape.rails)) return false;
    return true;
  });
  if (!back) {
    std::string who;
    for (int r = 0; r < ranks_; ++r)
      who += " rank " + std::to_string(r) + ": " + std::to_string(view_[static_cast<size_t>(r)].rails);
    return fail("rails not all back up 30 s after the phase's last fault ended (rails up per rank:" + who + ")");
  }
  rep_.drainMs.push_back(std::chrono::duration<double, std::milli>(Clock::now() - lastRestore_).count());
  return true;
}

bool Runner::killRank(const FaultStep& s) {
  if (!pump(Clock::now())) return false;  // the fault's first change is made before the kill
  auto pids = job_->workerRanks();
  if (!pids.count(s.killRank)) return fail("no process found for rank " + std::to_string(s.killRank));
  jobEnding_ = true;
  auto t = Clock::now();
  if (kill(pids[s.killRank], SIGKILL) != 0) return fail("kill rank " + std::to_string(s.killRank));
  log({{"event", "kill"}, {"rank", s.killRank}, {"after_fault", s.index}, {"while_faulted", s.killWhileFaulted}});
  KillRecord k{s.index, s.killRank, s.killWhileFaulted, {}};
  return everyRankErrors(t, s.killRank, "rank " + std::to_string(s.killRank) + " killed", &k) && restoreAll() &&
         startJob();
}

// An unroutable event at `t` (a kill of rank `exempt`, or every rail of a host pulled: -1): every
// other rank must return an error within the kill bound, and the job must end.
bool Runner::everyRankErrors(Clock::time_point t, int exempt, const std::string& what, KillRecord* k) {
  jobEnding_ = true;
  const auto bound = std::chrono::milliseconds(o_.deadlines.killBoundMs());
  auto allFailed = [&] {
    for (int r = 0; r < ranks_; ++r)
      if (r != exempt && view_[static_cast<size_t>(r)].failedNs == 0) return false;
    return true;
  };
  // Past the bound the test has failed already; waiting the ranks' own timeout on top tells a
  // late error from a hang.
  bool erred = pump(t + bound + std::chrono::milliseconds(2LL * o_.deadlines.timeoutMs), allFailed);
  std::string late;
  std::vector<int> lateRanks;
  for (int r = 0; r < ranks_; ++r) {
    if (r == exempt) continue;
    long long ns = view_[static_cast<size_t>(r)].failedNs;
    double ms = ns ? std::chrono::duration<double, std::milli>(fromMonoNs(ns) - t).count() : -1;
    k->errorMs.push_back(ms);
    if (ms < 0 || ms > static_cast<double>(bound.count())) {
      late += " rank " + std::to_string(r) + (ms < 0 ? ": no error" : ": " + std::to_string(ms) + " ms");
      lateRanks.push_back(r);
    }
  }
  rep_.kills.push_back(*k);
  log({{"event", "errors"}, {"what", what}, {"error_ms", k->errorMs}});
  if (!rep_.ok) return false;
  if (!erred || !late.empty())
    return fail(what + "; not every other rank errored within " + std::to_string(bound.count()) + " ms:" + late +
                lateRankLines(lateRanks));
  if (!pump(Clock::now() + std::chrono::seconds(30), [&] { return job_->finished(); }))
    return fail("the job did not end within 30 s of every rank's error");
  job_->wait();
  for (auto& [t2, line] : job_->linesFrom(&cursor_)) onLine(line);
  job_.reset();
  return rep_.ok;
}

bool Runner::stopJob() {
  jobEnding_ = true;
  job_->requestStop();
  if (!pump(Clock::now() + std::chrono::milliseconds(2LL * o_.deadlines.timeoutMs + 30000),
            [&] { return job_->finished(); }))
    return fail("the job did not stop");
  int code = job_->wait();
  for (auto& [t, line] : job_->linesFrom(&cursor_)) onLine(line);
  std::string text = job_->text();
  if (code != 0) return fail("the job exited with " + std::to_string(code));
  if (failover::countMatches(text, "done rank [0-9]+ iters") != ranks_) return fail("not every rank printed done");
  job_.reset();
  return rep_.ok;
}

SoakReport Runner::run() {
  // Generous: a loaded machine's job starts and drains, ~1-2 s per fault.
  deadline_ = t0_ + std::chrono::seconds(300 + 5LL * o_.spec.faults);
  std::vector<FaultStep> plan = planSoak(o_.shape, o_.spec);
  log({{"event", "start"}, {"seed", o_.spec.seed}, {"faults", o_.spec.faults}, {"kill_every", o_.spec.killEvery}});
  if (prepare() && startJob()) {
    auto lastStart = Clock::now();
    for (const FaultStep& s : plan) {
      current_ = &s;
      Cable& c = cables_[static_cast<size_t>(s.host)][static_cast<size_t>(s.rail)];
      auto notBefore = lastStart + std::chrono::milliseconds(s.gapMs);
      if (!pump(notBefore + std::chrono::seconds(60), [&] { return c.fault < 0 && Clock::now() >= notBefore; })) {
        fail("the cable of the next fault stayed busy");
        break;
      }
      startFault(s);
      lastStart = Clock::now();
      if (s.killRank >= 0 && s.killWhileFaulted) {
        if (!killRank(s)) break;
        continue;
      }
      if (s.lastOfPhase && !drain()) break;
      if (s.killRank >= 0 && !killRank(s)) break;
    }
    current_ = nullptr;
    if (rep_.ok && rep_.faultsPlayed != o_.spec.faults)
      fail("only " + std::to_string(rep_.faultsPlayed) + " of " + std::to_string(o_.spec.faults) + " faults played");
    if (rep_.ok && drain()) stopJob();
  }
  rep_.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
  log({{"event", "end"}, {"ok", rep_.ok}, {"summary", rep_.summary()}});
  return rep_;
}

// Every rail of `host` pulled at once by `kind` (a link or carrier fault, held): nothing can route
// around it, so every rank must error within the kill bound.
SoakReport Runner::allRailsDown(FaultKind kind, int host) {
  deadline_ = t0_ + std::chrono::seconds(300);
  log({{"event", "start"}, {"all_rails_down", faultKindName(kind)}, {"host", host}});
  if (prepare() && startJob()) {
    for (int r = 0; r < o_.shape.rails; ++r) {
      FaultStep s;
      s.index = r;
      s.kind = kind;
      s.host = host;
      s.rail = r;
      s.durationMs = 3600 * 1000;  // until restoreAll()
      startFault(s);
    }
    if (pump(Clock::now())) {
      KillRecord k{-1, -1, true, {}};
      (void)everyRankErrors(Clock::now(), -1,
                            "every rail of host " + std::to_string(host) + " down (" + faultKindName(kind) + ")", &k);
    }
    (void)restoreAll();
  }
  rep_.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
  return rep_;
}

}  // namespace

std::string SoakReport::summary() const {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << faultsPlayed << " faults in " << seconds << " s over " << jobs << " jobs:";
  for (int k = 0; k < kNumFaultKinds; ++k)
    s << " " << faultKindName(static_cast<FaultKind>(k)) << " " << perKind[static_cast<size_t>(k)];
  s << " (flaps by host " << flapsVia[0] << ", switch " << flapsVia[1] << ", carrier " << flapsVia[2] << ")\n";
  s << iterations << " iterations checked, " << failovers << " failovers (" << degradedFailovers << " for gray loss), "
    << failbacks << " fail-backs, " << bytesResent << " bytes resent, longest iteration " << maxIterMs << " ms\n";
  if (relayedMoves) s << relayedMoves << " moves onto a relay\n";
  // Kill -> error on every other rank: all kills, and those that came while a fault was on.
  for (bool faultedOnly : {false, true}) {
    std::vector<double> all;
    size_t n = 0;
    for (auto& k : kills)
      if (!faultedOnly || k.whileFaulted) {
        all.insert(all.end(), k.errorMs.begin(), k.errorMs.end());
        ++n;
      }
    std::sort(all.begin(), all.end());
    s << (faultedOnly ? "\n  of which " : "") << n
      << (faultedOnly ? " while a fault was on: " : " kills, kill -> error on every other rank: ");
    if (all.empty())
      s << "-";
    else
      s << "p50 " << all[all.size() / 2] << " ms, p99 " << all[(all.size() * 99) / 100] << " ms, max " << all.back()
        << " ms";
  }
  std::vector<double> d = drainMs;
  std::sort(d.begin(), d.end());
  if (!d.empty()) s << "\n" << d.size() << " drains: p50 " << d[d.size() / 2] << " ms, max " << d.back() << " ms";
  return s.str();
}

SoakReport runAllRailsDown(const testbed::TestbedState& tb, const SoakOptions& options, FaultKind kind, int host) {
  SoakReport r;
  bool linkOrCarrier = kind == FaultKind::kHostLink || kind == FaultKind::kSwitchLink ||
                       ((kind == FaultKind::kCarrierShort || kind == FaultKind::kCarrierHeld) && options.shape.tapNics);
  if (!linkOrCarrier || host < 0 || host >= options.shape.hosts) {
    r.ok = false;
    r.failure = std::string("all rails down: kind ") + faultKindName(kind) + " on host " + std::to_string(host) +
                " is not a held link or carrier fault on a host of the testbed";
    return r;
  }
  Runner runner(tb, options);
  return runner.allRailsDown(kind, host);
}

SoakReport runSoak(const testbed::TestbedState& tb, const SoakOptions& options) {
  SoakReport r;
  if (std::string bad = checkSoak(options.shape, options.spec); !bad.empty()) {
    r.ok = false;
    r.failure = bad;
    return r;
  }
  Runner runner(tb, options);
  return runner.run();
}

}  // namespace reccl::test::soak
