// `shrike data gen|import|split`: the command group; each subcommand lives in its own file.
#include "cli/commands.h"

namespace shrike::cli {

Runner add_data(CLI::App& app) {
  app.require_subcommand(1);
  auto* gen = app.add_subcommand("gen", "generate the built-in customer-service intent dataset");
  auto* import = app.add_subcommand("import", "convert a public intent/slot dataset to JSONL");
  auto* split = app.add_subcommand(
      "split",
      "your own labelled utterances (JSONL, CSV or a folder) into the splits shrike reads");
  Runner run_gen = add_data_gen(*gen);
  Runner run_import = add_data_import(*import);
  Runner run_split = add_data_split(*split);
  return [=] {
    if (gen->parsed()) return run_gen();
    return import->parsed() ? run_import() : run_split();
  };
}

}  // namespace shrike::cli
