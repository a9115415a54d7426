#include "command.h"

namespace reccl::cli {

// Placeholder until the inject subcommand lands; keeps the CLI linkable meanwhile.
void addInjectCommand(CLI::App& root, CommandContext& ctx) {
  auto* cmd = root.add_subcommand("inject", "inject (not built yet)");
  cmd->callback([&ctx] {
    std::fprintf(stderr, "reccl inject: not built yet\n");
    ctx.exitCode = kExitUnsupported;
  });
}

}  // namespace reccl::cli
