#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "command.h"

namespace reccl::cli {

void requireSubcommand(CLI::App* cmd, const std::string& path, CommandContext& ctx) {
  // CLI11's own check says only "A subcommand is required": a positional takes what is left, so
  // that the error names the word that was not a subcommand.
  cmd->require_subcommand(0, 1);
  auto unknown = std::make_shared<std::vector<std::string>>();
  cmd->add_option("subcommand", *unknown, "the subcommand")->group("");
  cmd->callback([cmd, unknown, path, &ctx] {
    if (!cmd->get_subcommands().empty()) return;
    std::vector<std::string> names;
    for (const CLI::App* s : static_cast<const CLI::App*>(cmd)->get_subcommands([](const CLI::App*) { return true; }))
      names.push_back(s->get_name());
    std::string want;
    for (size_t i = 0; i < names.size(); ++i)
      want += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    std::string what = unknown->empty() ? "missing subcommand" : "unknown subcommand '" + unknown->front() + "'";
    std::fprintf(stderr, "%s: %s (want %s)\n", path.c_str(), what.c_str(), want.c_str());
    ctx.exitCode = kExitUsage;
  });
}

}  // namespace reccl::cli
