// The man page and the bash completion, generated from the CLI's own definition (the
// subcommands, options and help texts main() gives CLI11), so they never drift from it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace shaperctl {

// shaperctl(8) in man(7) roff.
std::string man_page(const CLI::App& app, const std::string& version);

// A bash completion script: commands, their options, and values where they are known (devices,
// namespaces, modes, files).
std::string bash_completion(const CLI::App& app);

}  // namespace shaperctl
