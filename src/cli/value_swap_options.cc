#include "cli/value_swap_options.h"

#include <cstdio>

namespace shrike::cli {

void add_value_swap_options(CLI::App& app, data::ValueSwapOptions& options) {
  app.add_option("--swap-values", options.copies,
                 "copies of each example with its slot values swapped for others (values of the "
                 "same slot, or random words), so the model learns to copy values from the "
                 "utterance instead of recalling them (0: none)")
      ->check(CLI::Range(0, 16))
      ->capture_default_str();
  app.add_option("--swap-random", options.random_word_fraction,
                 "fraction of the swapped values made of random words")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
}

std::vector<data::Example> with_swapped_values(const std::vector<data::Example>& examples,
                                               data::ValueSwapOptions options, uint64_t seed,
                                               const char* what) {
  options.seed = seed;
  std::vector<data::Example> out = examples;
  const std::vector<data::Example> swapped = data::swap_slot_values(examples, options);
  out.insert(out.end(), swapped.begin(), swapped.end());
  if (!swapped.empty())
    std::fprintf(stderr, "%s: %zu examples + %zu copies with swapped slot values\n", what,
                 examples.size(), swapped.size());
  return out;
}

}  // namespace shrike::cli
