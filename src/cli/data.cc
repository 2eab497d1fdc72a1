// `shrike data gen|import`: the command group; each subcommand lives in its own file.
#include "cli/commands.h"

namespace shrike::cli {

Runner add_data(CLI::App& app) {
  app.require_subcommand(1);
  auto* gen = app.add_subcommand("gen", "generate the built-in customer-service intent dataset");
  auto* import = app.add_subcommand("import", "convert a public intent/slot dataset to JSONL");
  Runner run_gen = add_data_gen(*gen);
  Runner run_import = add_data_import(*import);
  return [=] { return gen->parsed() ? run_gen() : run_import(); };
}

}  // namespace shrike::cli
