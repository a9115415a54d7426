#include "command.h"

namespace reccl::cli {

// Placeholder until the testbed subcommand lands; keeps the CLI linkable meanwhile.
void addTestbedCommand(CLI::App& root, CommandContext& ctx) {
  auto* cmd = root.add_subcommand("testbed", "testbed (not built yet)");
  cmd->callback([&ctx] {
    std::fprintf(stderr, "reccl testbed: not built yet\n");
    ctx.exitCode = kExitUnsupported;
  });
}

}  // namespace reccl::cli
