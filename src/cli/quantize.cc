// placeholder
#include "cli/commands.h"

namespace shrike::cli {
Runner add_quantize(CLI::App& app) {
  return [] { return 1; };
}
}  // namespace shrike::cli
