// The `reccl` CLI is one CLI11 app; each subcommand lives in its own file and registers itself
// here. Exit codes: 0 ok, 1 failed, 64 usage, 77 unsupported on this kernel/machine.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace reccl::cli {

enum ExitCode : int { kExitOk = 0, kExitFailed = 1, kExitUsage = 64, kExitUnsupported = 77 };

// A subcommand's callback stores its exit code here; main returns it.
struct CommandContext {
  int exitCode = kExitOk;
  bool verbose = false;
};

// Makes `cmd` take exactly one of its subcommands. A word that is none of them fails the parse
// ("reccl: <path>: unknown subcommand 'x' (want a, b or c)", before any subcommand runs); none
// at all prints "reccl: <path>: missing subcommand (want ...)" and sets the usage exit code.
// `path` is "" for the root, else "inject", "detector", ...; it takes cmd's callback.
void requireSubcommand(CLI::App* cmd, const std::string& path, CommandContext& ctx);

void addTestbedCommand(CLI::App& root, CommandContext& ctx);
void addInjectCommand(CLI::App& root, CommandContext& ctx);
void addDetectorCommand(CLI::App& root, CommandContext& ctx);

}  // namespace reccl::cli
