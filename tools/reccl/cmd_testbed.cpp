// `reccl testbed`: up / down / exec / run / list / show. Thin: parse flags, call reccl_testbed.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "command.h"
#include "reccl/inject/fault_drop.h"
#include "reccl/netlink/netns.h"
#include "reccl/testbed/child_process.h"
#include "reccl/testbed/rank_runner.h"
#include "reccl/testbed/testbed.h"
#include "reccl/testbed/testbed_layout.h"
#include "stop_signals.h"

namespace reccl::cli {

namespace {

using reccl::testbed::Testbed;
using reccl::testbed::TestbedSpec;
using reccl::testbed::TestbedState;

// Bad input is a usage error (64); everything else that fails is 1.
int fail(const char* sub, const Status& s) {
  std::fprintf(stderr, "reccl testbed %s: %s\n", sub, s.message().c_str());
  return s.code() == Errc::kInvalidArgument ? kExitUsage : kExitFailed;
}

void printSummary(const TestbedState& st) {
  std::printf("testbed %s: %d hosts x %d rails, nic %s, mtu %d, fabric netns %s", st.spec.name.c_str(),
              st.spec.hosts, st.spec.rails, reccl::testbed::nicKindName(st.spec.nic), st.spec.mtu,
              st.fabricNetns.c_str());
  if (st.spec.nic == reccl::testbed::NicKind::kTap) {
    if (st.spec.wirePrio > 0) std::printf(", tap forwarder at SCHED_FIFO %d", st.spec.wirePrio);
    else std::printf(", tap forwarder at normal priority");
  }
  std::printf("\n");
  std::printf("  %-4s %-14s %-16s", "host", "netns", "mgmt0");
  for (int r = 0; r < st.spec.rails; ++r) std::printf(" %-16s", ("rail" + std::to_string(r)).c_str());
  std::printf("\n");
  for (const auto& h : st.hosts) {
    std::printf("  %-4d %-14s %-16s", h.index, h.netns.c_str(), h.mgmt.address.c_str());
    for (const auto& r : h.rails) std::printf(" %-16s", r.address.c_str());
    std::printf("\n");
  }
}

// `reccl inject` pins its drop program per device and namespace; with the namespace gone only
// the pins hold the program. The testbed library knows nothing of the injector (the injector
// acts on testbeds, not the other way round), so the command that removes a testbed asks the
// injector to detach what it left on the testbed's namespaces that are gone now.
void removeInjectPins(const std::string& name, reccl::testbed::DownReport& report) {
  for (const std::string& ns : reccl::inject::faultDropPinnedNetns()) {
    if (!reccl::testbed::isTestbedNetns(name, ns) || reccl::netlink::netnsExists(ns)) continue;
    auto devs = reccl::inject::detachFaultDropNetns(ns);
    if (!devs.ok()) {
      report.errors.push_back("inject pins of " + ns + ": " + devs.status().message());
      continue;
    }
    for (const std::string& dev : *devs) {
      report.removed.push_back("inject pins " + reccl::inject::faultDropPinDir(ns, dev));
    }
  }
}

}  // namespace

void addTestbedCommand(CLI::App& root, CommandContext& ctx) {
  auto* tb = root.add_subcommand("testbed", "hosts x rails out of network namespaces on this machine");
  requireSubcommand(tb, "testbed", ctx);
  tb->footer(
      "EXAMPLES:\n"
      "  reccl testbed up --name tb1 --hosts 2 --rails 2\n"
      "  reccl testbed exec --name tb1 --host 0 -- ping -c1 10.100.0.2\n"
      "  reccl testbed run --name tb1 --ranks-per-host 2 -- sh -c 'echo $RANK of $WORLD_SIZE'\n"
      "  reccl testbed show --name tb1 --json\n"
      "  reccl testbed down --name tb1\n"
      "Host i is netns <name>-h<i> (mgmt0 10.99.0.(i+1)/24, rail<k> 10.(100+k).0.(i+1)/24);\n"
      "switch ports h<i>r<k> / h<i>m sit on bridges rail<k> / mgmt in netns <name>-fab.");

  // up
  {
    auto spec = std::make_shared<TestbedSpec>();
    auto nic = std::make_shared<std::string>("veth");
    auto json = std::make_shared<bool>(false);
    auto* c = tb->add_subcommand("up", "create a testbed (everything or nothing)");
    c->add_option("--name", spec->name, "testbed name: [a-z0-9][a-z0-9-]*, at most 12 characters")->required();
    c->add_option("--hosts", spec->hosts, "hosts, 1-64")->capture_default_str();
    c->add_option("--rails", spec->rails, "rails (NICs per host and rail switches), 1-8")->capture_default_str();
    c->add_option("--mtu", spec->mtu, "MTU of every NIC, port and bridge")->capture_default_str();
    c->add_option("--nic", *nic, "rail NIC kind: veth, or tap (carrier via TUNSETCARRIER, like a physical NIC)")
        ->capture_default_str();
    c->add_option("--wire-prio", spec->wirePrio,
                  "tap NICs: SCHED_FIFO priority (1-99) of the forwarder that is their cable and switch; 0: "
                  "normal scheduling")
        ->capture_default_str();
    c->add_flag("--json", *json, "print the testbed record as JSON");
    c->footer("EXAMPLES:\n  reccl testbed up --name tb1 --hosts 4 --rails 2 --mtu 1500\n"
              "  reccl testbed up --name tb2 --nic tap");
    c->callback([&ctx, spec, nic, json] {
      auto kind = reccl::testbed::parseNicKind(*nic);
      if (!kind.ok()) { ctx.exitCode = fail("up", kind.status()); return; }
      spec->nic = *kind;
      // An interrupted `up` removes what it built (with `down`'s code) and exits 128+signal; a
      // second signal while it does so waits, blocked, and is dropped.
      // The first signal decides the exit code, so it is read as soon as it comes (pending
      // signals read later come lowest number first).
      StopSignals signals;
      int sig = 0;
      auto st = Testbed::up(*spec, [&] {
        if (sig == 0) sig = signals.caught();
        return sig != 0;
      });
      if (sig == 0) sig = signals.caught();
      if (sig != 0 && st.ok()) {
        // The signal came after the last step: still undone, as the user asked.
        auto rep = Testbed::down(spec->name);
        if (!rep.ok() || !rep->errors.empty()) {
          st = Status{Errc::kSystem, "rollback left: " + (rep.ok() ? rep->errors.front() : rep.status().message())};
        } else {
          st = Status{Errc::kAborted, "interrupted"};
        }
      }
      if (sig != 0) {
        std::fprintf(stderr, "reccl testbed up: interrupted by %s, %s\n", strsignal(sig),
                     st.status().code() == Errc::kAborted ? "everything it built removed"
                                                          : st.status().message().c_str());
        ctx.exitCode = 128 + sig;
        return;
      }
      if (!st.ok()) { ctx.exitCode = fail("up", st.status()); return; }
      if (*json) std::printf("%s\n", st->toJson().c_str());
      else printSummary(*st);
    });
  }
  // down
  {
    auto name = std::make_shared<std::string>();
    auto force = std::make_shared<bool>(false);
    auto* c = tb->add_subcommand("down", "remove a testbed and everything it left (idempotent)");
    c->add_option("--name", *name, "testbed name")->required();
    c->add_flag("--force", *force,
                "also remove namespaces named like the testbed's that neither its state record lists nor "
                "its wiring proves its own (and kill what runs in them)");
    c->footer("EXAMPLES:\n  reccl testbed down --name tb1\n  reccl testbed down --name tb1 --force");
    c->callback([&ctx, name, force] {
      auto rep = Testbed::down(*name, *force);
      if (!rep.ok()) { ctx.exitCode = fail("down", rep.status()); return; }
      removeInjectPins(*name, *rep);
      for (const auto& r : rep->removed) std::printf("removed %s\n", r.c_str());
      if (rep->removed.empty()) std::printf("testbed %s: nothing to remove\n", name->c_str());
      for (const auto& e : rep->errors) std::fprintf(stderr, "reccl testbed down: %s\n", e.c_str());
      if (!rep->errors.empty()) ctx.exitCode = kExitFailed;
    });
  }
  // exec
  {
    auto name = std::make_shared<std::string>();
    auto host = std::make_shared<int>(0);
    auto cmd = std::make_shared<std::vector<std::string>>();
    auto* c = tb->add_subcommand("exec", "run a command in one host's network namespace");
    c->add_option("--name", *name, "testbed name")->required();
    c->add_option("--host", *host, "host index")->required();
    c->add_option("cmd", *cmd, "command (after --)")->required();
    c->footer("EXAMPLES:\n  reccl testbed exec --name tb1 --host 1 -- ip -br addr\n"
              "  reccl testbed exec --name tb1 --host 0 -- iperf3 -c 10.101.0.2 -t 1");
    c->callback([&ctx, name, host, cmd] {
      auto st = Testbed::load(*name);
      if (!st.ok()) { ctx.exitCode = fail("exec", st.status()); return; }
      if (*host < 0 || *host >= st->spec.hosts) {
        ctx.exitCode = fail("exec", {Errc::kInvalidArgument,
                                     "--host " + std::to_string(*host) + " out of range [0, " +
                                         std::to_string(st->spec.hosts - 1) + "]"});
        return;
      }
      auto rc = reccl::testbed::runInherited(st->hosts[static_cast<size_t>(*host)].netns, *cmd);
      if (!rc.ok()) { ctx.exitCode = fail("exec", rc.status()); return; }
      ctx.exitCode = *rc;
    });
  }
  // run
  {
    auto opts = std::make_shared<reccl::testbed::RunOptions>();
    auto* c = tb->add_subcommand("run", "start one process per rank in the hosts (torchrun-style env)");
    c->add_option("--name", opts->name, "testbed name")->required();
    c->add_option("--ranks-per-host", opts->ranksPerHost, "ranks per host")->capture_default_str();
    c->add_option("--port", opts->masterPort, "MASTER_PORT; 0 picks a free port on host 0")->capture_default_str();
    c->add_option("--timeout", opts->timeoutSec, "seconds before every rank is killed (exit 124); 0 none")
        ->capture_default_str();
    c->add_option("cmd", opts->argv, "command (after --)")->required();
    c->footer("Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR\n"
              "(host 0's mgmt address), MASTER_PORT and RECCL_TESTBED. Output lines are prefixed\n"
              "'[rank N] '. Exit: the first non-zero rank exit code, 124 on --timeout.\n"
              "EXAMPLES:\n"
              "  reccl testbed run --name tb1 --ranks-per-host 2 --timeout 60 -- reccl-bench -b 1M -e 64M");
    c->callback([&ctx, opts] {
      auto rc = reccl::testbed::runRanks(*opts);
      if (!rc.ok()) { ctx.exitCode = fail("run", rc.status()); return; }
      ctx.exitCode = *rc;
    });
  }
  // list
  {
    auto* c = tb->add_subcommand("list", "list testbeds on this machine");
    c->callback([&ctx] {
      for (const std::string& n : Testbed::list()) {
        auto st = Testbed::load(n);
        if (!st.ok()) {
          std::printf("%-12s (unreadable: %s)\n", n.c_str(), st.status().message().c_str());
          continue;
        }
        std::printf("%-12s %-8s %dx%d %-4s mtu %d\n", n.c_str(), st->status.c_str(), st->spec.hosts,
                    st->spec.rails, reccl::testbed::nicKindName(st->spec.nic), st->spec.mtu);
      }
    });
  }
  // show
  {
    auto name = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    auto* c = tb->add_subcommand("show", "print a testbed's hosts, NICs and addresses");
    c->add_option("--name", *name, "testbed name")->required();
    c->add_flag("--json", *json, "print the record as JSON (what tools read)");
    c->callback([&ctx, name, json] {
      auto st = Testbed::load(*name);
      if (!st.ok()) { ctx.exitCode = fail("show", st.status()); return; }
      if (*json) std::printf("%s\n", st->toJson().c_str());
      else printSummary(*st);
    });
  }
}

}  // namespace reccl::cli
