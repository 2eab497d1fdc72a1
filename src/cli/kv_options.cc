#include "cli/kv_options.h"

#include <stdexcept>

namespace shrike::cli {

void add_kv_cache_options(CLI::App& app, KvCacheArgs& args, kv::KvCacheOptions& options,
                          const std::string& type_help) {
  app.add_option("--kv-type", args.type, type_help)
      ->check(CLI::IsMember({"f16", "f32", "int8", "int8-mixed"}))
      ->capture_default_str();
  args.mixed_only = {
      app.add_option("--kv-sinks", options.sinks, "int8-mixed: first positions kept in f16")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str(),
      app.add_option("--kv-window", options.window,
                     "int8-mixed: most recent positions kept in f16 (not yet decided)")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str(),
      app.add_option("--kv-heavy", options.heavy_fraction,
                     "int8-mixed: fraction of the older positions kept in f16 as heavy hitters "
                     "(highest accumulated attention), 0..1")
          ->check(CLI::Range(0.0, 1.0))
          ->capture_default_str()};
  app.add_option("--kv-fp16-layers", options.fp16_layers,
                 "int8-mixed: layers kept in f16 for every position, comma-separated (e.g. 0,5)")
      ->delimiter(',');
}

void resolve_kv_cache_options(const KvCacheArgs& args, kv::KvCacheOptions& options) {
  options.type = *kv::kv_type_from_name(args.type);  // CLI11 checked the name
  for (const CLI::Option* o : args.mixed_only)
    if (o->count() > 0 && !options.mixed())
      throw std::invalid_argument(o->get_name() + " applies to --kv-type int8-mixed");
}

}  // namespace shrike::cli
