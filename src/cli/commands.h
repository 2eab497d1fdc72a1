// The `shrike` subcommands. Each registers its options on the CLI11 app and returns the function
// that runs it (exit code).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace shrike::cli {

using Runner = std::function<int()>;

Runner add_generate(CLI::App& app);
Runner add_synth(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_loadtest(CLI::App& app);
Runner add_tokenize(CLI::App& app);
Runner add_convert(CLI::App& app);
Runner add_serve(CLI::App& app);

}  // namespace shrike::cli
