#include "command.h"

namespace reccl::cli {

// Placeholder until the detector subcommand lands; keeps the CLI linkable meanwhile.
void addDetectorCommand(CLI::App& root, CommandContext& ctx) {
  auto* cmd = root.add_subcommand("detector", "detector (not built yet)");
  cmd->callback([&ctx] {
    std::fprintf(stderr, "reccl detector: not built yet\n");
    ctx.exitCode = kExitUnsupported;
  });
}

}  // namespace reccl::cli
