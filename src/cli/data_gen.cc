// placeholder
#include "cli/commands.h"
namespace shrike::cli {
Runner add_data_gen(CLI::App& app) { return [] { return 1; }; }
}  // namespace shrike::cli
