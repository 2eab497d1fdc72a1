// `shrike data split INPUT -o DIR`: a user's own labelled utterances (one JSONL or CSV file, or a
// folder of them) into train/dev/test, with test_noisy and the calibration set derived from the
// same utterances; an input already split (train/dev/test.jsonl) keeps its splits.
#include <cstdio>
#include <set>
#include <string>

#include "cli/commands.h"
#include "data/user_data.h"

namespace shrike::cli {
namespace {

struct SplitArgs {
  std::string input, output;
  data::SplitOptions options;
};

int run_split(const SplitArgs& a) {
  data::UserSplits s;
  const bool presplit = data::read_presplit(a.input, a.options, s);
  if (!presplit) s = data::split_examples(data::read_labelled(a.input), a.options);
  data::write_user_splits(s, a.output);
  std::set<std::string> slot_types;
  for (const auto* v : {&s.train, &s.dev, &s.test})
    for (const data::Example& ex : *v)
      for (const auto& [name, value] : ex.slots) slot_types.insert(name);
  std::printf(
      "%s: %s%lld distinct texts, %lld intents, %zu slot types -> train %zu, dev %zu, test %zu, "
      "test_noisy %zu (%lld changed by the noise pass), calib %zu (train + dev, noisy); wrote "
      "%s\n",
      a.input.c_str(), presplit ? "already split; " : "", (long long)s.distinct_texts,
      (long long)s.intents, slot_types.size(), s.train.size(), s.dev.size(), s.test.size(),
      s.test_noisy.size(), (long long)s.noisy_changed, s.calib.size(), a.output.c_str());
  if (s.test.empty())
    std::fprintf(stderr,
                 "data split: warning: no test examples (every intent has fewer than 3 distinct "
                 "texts, or --test 0)\n");
  return 0;
}

}  // namespace

Runner add_data_split(CLI::App& app) {
  auto a = std::make_shared<SplitArgs>();
  app.add_option("input", a->input,
                 "labelled utterances: .jsonl ({text, intent, slots?, lang?} per line), .csv "
                 "(header: text,intent[,slots][,lang]; slots as a JSON object) or a folder of them")
      ->required();
  app.add_option("-o,--output", a->output,
                 "folder for train, dev, test, test_noisy and calib .jsonl")
      ->required();
  app.add_option("--dev", a->options.dev, "fraction of each intent's texts for dev")
      ->check(CLI::Range(0.0, 0.5))
      ->capture_default_str();
  app.add_option("--test", a->options.test, "fraction of each intent's texts for test")
      ->check(CLI::Range(0.0, 0.5))
      ->capture_default_str();
  app.add_option("--seed", a->options.seed, "seed of the split and the noise")
      ->capture_default_str();
  return [a] { return run_split(*a); };
}

}  // namespace shrike::cli
