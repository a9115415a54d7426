// `reccl inject`: kernel-level faults on testbed (or real) NICs. Thin: flags -> reccl_inject.
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "reccl/inject/fault_plan.h"
#include "reccl/inject/fault_session.h"
#include "reccl/inject/plan_runner.h"
#include "stop_signals.h"

namespace reccl::cli {

namespace {

using inject::Target;

int exitCodeFor(const Status& st) {
  switch (st.code()) {
    case Errc::kOk: return kExitOk;
    case Errc::kInvalidArgument:
    case Errc::kNotFound:
    case Errc::kPermission:
      return kExitUsage;
    case Errc::kUnsupported: return kExitUnsupported;
    default: return kExitFailed;
  }
}

int report(const char* cmd, const Status& st) {
  if (!st.ok()) std::fprintf(stderr, "reccl inject %s: %s\n", cmd, st.message().c_str());
  return exitCodeFor(st);
}

struct TargetFlags {
  std::string netns;
  std::string dev;
  std::string side = "host";
  bool force = false;

  void add(CLI::App* cmd, bool withSide = true) {
    cmd->add_option("--netns", netns, "network namespace (/run/netns name) of the device")->required();
    cmd->add_option("--dev", dev, "device name inside the namespace")->required();
    if (withSide)
      cmd->add_option("--side", side, "host: the NIC itself; switch: its switch port (veth peer)")
          ->capture_default_str();
    cmd->add_flag("--force", force, "allow the management NIC and the root namespace");
  }
  Result<Target> target() const {
    RECCL_ASSIGN_OR_RETURN(inject::Side s, inject::parseSide(side));
    return Target{netns, dev, s};
  }
};

int runAndReport(const char* cmd, const inject::FaultPlan& plan, inject::PlanRunOptions opts,
                 bool quiet) {
  StopSignals signals;
  opts.stopFd = signals.fd();
  auto res = inject::runPlan(plan, opts);
  if (!res) return report(cmd, res.status());
  const auto& r = *res;
  if (!quiet)
    std::printf("%s: %zu actions run, %d failed; lateness p50 %.1f us, p99 %.1f us, max %.1f us "
                "(done p99 %.1f us, %s)\n",
                cmd, r.records.size(), r.failed, r.lateP50Ns / 1e3, r.lateP99Ns / 1e3,
                r.lateMaxNs / 1e3, r.doneP99Ns / 1e3, r.schedPolicy.c_str());
  if (r.stopped) {
    int sig = signals.caught();
    std::fprintf(stderr, "reccl inject %s: stopped by %s, every fault undone%s\n", cmd,
                 sig ? strsignal(sig) : "signal", r.restoreStatus.ok() ? "" : " (with errors)");
  }
  if (!r.restoreStatus.ok()) {
    std::fprintf(stderr, "reccl inject %s: restore: %s\n", cmd, r.restoreStatus.message().c_str());
    return kExitFailed;
  }
  if (!r.logStatus.ok()) {
    std::fprintf(stderr, "reccl inject %s: %s (the plan ran; its log is incomplete)\n", cmd,
                 r.logStatus.message().c_str());
    return kExitFailed;
  }
  if (r.failed) {
    for (const auto& rec : r.records)
      if (!rec.status.ok())
        std::fprintf(stderr, "reccl inject %s: %s at %lld ms: %s\n", cmd,
                     inject::actionName(rec.kind), static_cast<long long>(rec.atMs),
                     rec.status.message().c_str());
    return kExitFailed;
  }
  return r.stopped ? kExitFailed : kExitOk;
}

void addLinkCommand(CLI::App* parent, CommandContext& ctx, const char* name, bool carrier, bool up) {
  auto* cmd = parent->add_subcommand(
      name, carrier ? (up ? "set a tap NIC's carrier on (TUNSETCARRIER; in the lab: plug a VM's cable)"
                          : "drop a tap NIC's carrier (TUNSETCARRIER, the physical-NIC path; in the lab: pull a "
                            "VM's cable)")
                    : (up ? "set a device admin up (rtnetlink)" : "set a device admin down (rtnetlink)"));
  auto flags = std::make_shared<TargetFlags>();
  flags->add(cmd, !carrier);
  cmd->callback([&ctx, flags, name, carrier, up] {
    auto t = flags->target();
    if (!t) {
      ctx.exitCode = report(name, t.status());
      return;
    }
    Status st = carrier ? inject::injectCarrier(*t, up, flags->force)
                        : inject::injectLinkAdmin(*t, up, flags->force);
    ctx.exitCode = report(name, st);
    if (st.ok()) std::printf("%s %s: done\n", name, t->toString().c_str());
  });
}

struct DropFlags {
  double rate = 0.0;
  bool egress = false;
  bool ingress = false;
  std::string flow = "*";

  Result<inject::DropRule> rule(bool blackhole) const {
    inject::DropRule r;
    r.rate = blackhole ? 1.0 : rate;
    RECCL_TRY(inject::rateToThreshold(r.rate).status());
    r.dirs = egress && !ingress ? inject::kEgress
             : ingress && !egress ? inject::kIngress
                                  : inject::kBothDirections;
    RECCL_ASSIGN_OR_RETURN(r.flow, inject::parseFlow(flow));
    return r;
  }
};

void addDropCommand(CLI::App* parent, CommandContext& ctx, const char* name, bool blackhole) {
  auto* cmd = parent->add_subcommand(
      name, blackhole ? "drop every packet of a direction (and flow) on a device (tc BPF)"
                      : "drop packets with a probability on a device (tc BPF, changeable live)");
  auto flags = std::make_shared<TargetFlags>();
  auto drop = std::make_shared<DropFlags>();
  flags->add(cmd);
  if (!blackhole) cmd->add_option("--rate", drop->rate, "drop probability in [0,1]")->required();
  cmd->add_flag("--egress", drop->egress, "only packets leaving the device");
  cmd->add_flag("--ingress", drop->ingress, "only packets arriving on the device");
  cmd->add_option("--flow", drop->flow, "only this flow: proto:src:sport:dst:dport, * = any")
      ->capture_default_str();
  cmd->footer(blackhole ? "EXAMPLE:\n  reccl inject blackhole --netns tb-h0 --dev rail0 --egress"
                        : "EXAMPLES:\n  reccl inject drop --netns tb-h0 --dev rail0 --rate 0.01\n"
                          "  reccl inject drop --netns tb-h0 --dev rail0 --rate 1 --egress "
                          "--flow udp:*:*:10.100.0.2:5000");
  cmd->callback([&ctx, flags, drop, name, blackhole] {
    auto t = flags->target();
    auto rule = drop->rule(blackhole);
    if (!t || !rule) {
      ctx.exitCode = report(name, !t ? t.status() : rule.status());
      return;
    }
    auto slot = inject::injectDrop(*t, *rule, flags->force);
    ctx.exitCode = report(name, slot.status());
    if (slot)
      std::printf("%s %s: rule %d: %s\n", name, t->toString().c_str(), *slot,
                  rule->toString().c_str());
  });
}

void addClearCommand(CLI::App* parent, CommandContext& ctx) {
  auto* cmd = parent->add_subcommand(
      "clear", "undo every fault on a NIC's cable: drop programs removed, both ends up, carrier on");
  auto flags = std::make_shared<TargetFlags>();
  flags->add(cmd, false);
  cmd->callback([&ctx, flags] {
    Target t{flags->netns, flags->dev, inject::Side::kHost};
    Status st = inject::clearTarget(t, flags->force);
    ctx.exitCode = report("clear", st);
    if (st.ok()) std::printf("clear %s: done\n", t.toString().c_str());
  });
}

void addStatsCommand(CLI::App* parent, CommandContext& ctx) {
  auto* cmd = parent->add_subcommand("stats", "drop rules and their counters on a device");
  auto flags = std::make_shared<TargetFlags>();
  auto json = std::make_shared<bool>(false);
  flags->add(cmd);
  cmd->add_flag("--json", *json, "machine-readable output");
  cmd->callback([&ctx, flags, json] {
    auto t = flags->target();
    if (!t) {
      ctx.exitCode = report("stats", t.status());
      return;
    }
    auto stats = inject::readDropStats(*t, flags->force);
    if (!stats) {
      ctx.exitCode = report("stats", stats.status());
      return;
    }
    if (*json) {
      nlohmann::json j = {{"netns", t->netns}, {"dev", t->dev}, {"side", inject::sideName(t->side)}};
      j["rules"] = nlohmann::json::array();
      for (const auto& r : stats->rules)
        j["rules"].push_back({{"slot", r.slot}, {"direction", inject::directionName(r.rule.dirs)},
                              {"flow", inject::flowToString(r.rule.flow)}, {"rate", r.rule.rate},
                              {"seen", r.counters.seen}, {"dropped", r.counters.dropped}});
      j["ingress"] = {{"seen", stats->ingressAll.seen}, {"dropped", stats->ingressAll.dropped}};
      j["egress"] = {{"seen", stats->egressAll.seen}, {"dropped", stats->egressAll.dropped}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%-5s %-8s %-34s %-10s %12s %12s\n", "slot", "dir", "flow", "rate", "seen", "dropped");
      for (const auto& r : stats->rules)
        std::printf("%-5d %-8s %-34s %-10g %12llu %12llu\n", r.slot,
                    inject::directionName(r.rule.dirs), inject::flowToString(r.rule.flow).c_str(),
                    r.rule.rate, static_cast<unsigned long long>(r.counters.seen),
                    static_cast<unsigned long long>(r.counters.dropped));
      std::printf("all ingress: seen %llu dropped %llu; all egress: seen %llu dropped %llu\n",
                  static_cast<unsigned long long>(stats->ingressAll.seen),
                  static_cast<unsigned long long>(stats->ingressAll.dropped),
                  static_cast<unsigned long long>(stats->egressAll.seen),
                  static_cast<unsigned long long>(stats->egressAll.dropped));
    }
    ctx.exitCode = kExitOk;
  });
}

struct TimingFlags {
  std::string log;
  bool noRt = false;
  int64_t spinUs = 100;
  bool quiet = false;

  void add(CLI::App* cmd) {
    cmd->add_option("--log", log, "write one JSON line per action (both clocks) to this file");
    cmd->add_flag("--no-rt", noRt, "do not try SCHED_FIFO for the timing thread");
    cmd->add_option("--spin-us", spinUs, "busy-wait this long before each action")
        ->capture_default_str()->check(CLI::Range(0, 10000));
    cmd->add_flag("-q,--quiet", quiet, "no summary line");
  }
  inject::PlanRunOptions options(bool force) const {
    inject::PlanRunOptions o;
    o.force = force;
    o.logPath = log;
    o.realtime = !noRt;
    o.spinNs = spinUs * 1000;
    return o;
  }
};

void addFlapCommand(CLI::App* parent, CommandContext& ctx) {
  auto* cmd = parent->add_subcommand("flap", "alternate a link down and up with precise timing");
  auto flags = std::make_shared<TargetFlags>();
  auto spec = std::make_shared<inject::FlapSpec>();
  auto timing = std::make_shared<TimingFlags>();
  flags->add(cmd);
  cmd->add_option("--period", spec->periodMs, "ms from one down to the next")->required();
  cmd->add_option("--count", spec->count, "number of down/up cycles")->required();
  cmd->add_option("--down", spec->downMs, "ms down per cycle (default: half the period)");
  cmd->add_option("--jitter", spec->jitterMs, "shift each transition by up to +-MS (seeded)");
  cmd->add_option("--seed", spec->seed, "jitter seed")->capture_default_str();
  cmd->add_flag("--carrier", spec->carrier, "carrier-off/on a tap NIC (a lab VM's cable) instead of link-down/up");
  timing->add(cmd);
  cmd->footer("EXAMPLE:\n  reccl inject flap --netns tb-h0 --dev rail0 --side switch --period 200 "
              "--count 10 --jitter 10 --log flap.jsonl");
  cmd->callback([&ctx, flags, spec, timing] {
    auto t = flags->target();
    if (!t) {
      ctx.exitCode = report("flap", t.status());
      return;
    }
    if (spec->carrier && t->side != inject::Side::kHost) {
      ctx.exitCode = report("flap", {Errc::kInvalidArgument, "--carrier acts on the host nic (a tap or a lab VM's nic)"});
      return;
    }
    auto actions = inject::expandFlap(*t, *spec, 0);
    if (!actions) {
      ctx.exitCode = report("flap", actions.status());
      return;
    }
    inject::FaultPlan plan{std::move(*actions)};
    ctx.exitCode = runAndReport("flap", plan, timing->options(flags->force), timing->quiet);
  });
}

void addPlanCommand(CLI::App* parent, CommandContext& ctx) {
  auto* cmd = parent->add_subcommand("plan", "run a timed fault plan (JSON), undoing every fault at the end");
  auto file = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  auto check = std::make_shared<bool>(false);
  auto timing = std::make_shared<TimingFlags>();
  cmd->add_option("FILE", *file, "plan file (see docs/inject.md)")->required();
  cmd->add_flag("--force", *force, "allow the management NIC and the root namespace");
  cmd->add_flag("--check", *check, "parse and validate only");
  timing->add(cmd);
  cmd->footer("EXAMPLE:\n  reccl inject plan faults.json --log faults.jsonl");
  cmd->callback([&ctx, file, force, check, timing] {
    auto plan = inject::loadPlanFile(*file);
    if (!plan) {
      ctx.exitCode = report("plan", plan.status());
      return;
    }
    if (*check) {
      std::printf("plan %s: %zu actions, ends at %lld ms\n", file->c_str(), plan->actions.size(),
                  static_cast<long long>(plan->endMs()));
      ctx.exitCode = kExitOk;
      return;
    }
    ctx.exitCode = runAndReport("plan", *plan, timing->options(*force), timing->quiet);
  });
}

}  // namespace

void addInjectCommand(CLI::App& root, CommandContext& ctx) {
  auto* cmd = root.add_subcommand("inject", "inject kernel-level network faults (links, carrier, BPF drops, plans)");
  requireSubcommand(cmd, "inject", ctx);
  cmd->footer(
      "Acts only on the namespace/device named; refuses mgmt0 and the root namespace unless --force.\n"
      "EXAMPLES:\n"
      "  reccl inject link-down --netns tb-h0 --dev rail0 --side switch\n"
      "  reccl inject carrier-off --netns tb-h0 --dev rail1\n"
      "  reccl inject drop --netns tb-h0 --dev rail0 --rate 0.01 --egress\n"
      "  reccl inject stats --netns tb-h0 --dev rail0 --json\n"
      "  reccl inject clear --netns tb-h0 --dev rail0\n"
      "  reccl inject plan faults.json --log faults.jsonl");
  addLinkCommand(cmd, ctx, "link-down", false, false);
  addLinkCommand(cmd, ctx, "link-up", false, true);
  addLinkCommand(cmd, ctx, "carrier-off", true, false);
  addLinkCommand(cmd, ctx, "carrier-on", true, true);
  addFlapCommand(cmd, ctx);
  addDropCommand(cmd, ctx, "drop", false);
  addDropCommand(cmd, ctx, "blackhole", true);
  addClearCommand(cmd, ctx);
  addStatsCommand(cmd, ctx);
  addPlanCommand(cmd, ctx);
}

}  // namespace reccl::cli
