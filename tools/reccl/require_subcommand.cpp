#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "command.h"

namespace reccl::cli {

namespace {
// A ParseError of its own: CLI11 rewraps a validator's ValidationError with the option's name.
struct UnknownSubcommand : CLI::ParseError {
  explicit UnknownSubcommand(std::string msg)
      : CLI::ParseError("UnknownSubcommand", std::move(msg), CLI::ExitCodes::ExtrasError) {}
};

std::string choices(const CLI::App* cmd) {
  std::vector<std::string> names;
  for (const CLI::App* s : cmd->get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
  std::string want;
  for (size_t i = 0; i < names.size(); ++i) want += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return want;
}
}  // namespace

void requireSubcommand(CLI::App* cmd, const std::string& path, CommandContext& ctx) {
  // CLI11's own check says only "A subcommand is required", and a word that is not a subcommand
  // beside one that is only "not expected". A hidden positional takes such words so that the
  // error names them: refused as they are parsed, before any subcommand runs.
  cmd->require_subcommand(0, 1);
  const std::string where = path.empty() ? "" : path + ": ";
  auto words = std::make_shared<std::vector<std::string>>();
  cmd->add_option("subcommand", *words, "the subcommand")
      ->group("")
      ->each([cmd, where](const std::string& word) {
        throw UnknownSubcommand(where + "unknown subcommand '" + word + "' (want " + choices(cmd) + ")");
      });
  cmd->callback([cmd, where, words, &ctx] {  // holds `words`, the option's storage (a word fails the parse)
    if (!cmd->get_subcommands().empty()) return;
    std::fprintf(stderr, "reccl: %smissing subcommand (want %s)\n", where.c_str(), choices(cmd).c_str());
    ctx.exitCode = kExitUsage;
  });
}

}  // namespace reccl::cli
