// The KV cache options `serve`, `generate`, `bench` and `eval` share: --kv-type and the
// int8-mixed knobs (--kv-sinks, --kv-window, --kv-heavy, --kv-fp16-layers), registered once.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "kv/contiguous_kv.h"

namespace shrike::cli {

struct KvCacheArgs {
  std::string type;                      // --kv-type as given (the caller sets the default)
  std::vector<CLI::Option*> mixed_only;  // --kv-sinks, --kv-window, --kv-heavy
};

// Registers the options on app, bound to args and options; type_help describes --kv-type.
void add_kv_cache_options(CLI::App& app, KvCacheArgs& args, kv::KvCacheOptions& options,
                          const std::string& type_help);

// Sets options.type from args.type; throws std::invalid_argument when an int8-mixed knob was given
// with another type.
void resolve_kv_cache_options(const KvCacheArgs& args, kv::KvCacheOptions& options);

}  // namespace shrike::cli
