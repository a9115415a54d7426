#include <cstdio>

#include "command.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"

int main(int argc, char** argv) {
  using namespace reccl::cli;
  CLI::App app{"reccl: testbed, fault injection and detector tools for the reccl library"};
  app.footer(
      "EXAMPLES:\n"
      "  reccl testbed up --name tb1 --hosts 2 --rails 2\n"
      "  reccl testbed run --name tb1 --ranks-per-host 1 -- reccl-bench -b 1M -e 64M\n"
      "  reccl inject link-down --netns tb1-h0 --dev rail0\n"
      "  reccl detector watch --json\n"
      "  reccl testbed down --name tb1\n\n"
      "Environment: RECCL_DEBUG=INFO and friends, see `reccl params`.");
  CommandContext ctx;
  app.add_flag("-v,--verbose", ctx.verbose, "log at INFO level");
  auto* paramsCmd = app.add_subcommand("params", "list the RECCL_* environment variables");
  bool markdown = false;
  paramsCmd->add_flag("--markdown", markdown, "print as a Markdown table");
  paramsCmd->callback([&] { reccl::params::printTable(stdout, markdown); });
  app.parse_complete_callback([&] {
    if (ctx.verbose) {
      setenv("RECCL_DEBUG", "INFO", 0);
      reccl::logReloadEnv();
    }
  });
  addTestbedCommand(app, ctx);
  addInjectCommand(app, ctx);
  addDetectorCommand(app, ctx);
  requireSubcommand(&app, "", ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "reccl: %s\n", e.what());
    return kExitUsage;
  }
  return ctx.exitCode;
}
