// `shrike data gen`: the built-in datasets as JSONL files.
//   --task intent (default): the customer-service intent/slot dataset (train, dev, test,
//                            test_noisy).
//   --task recall:           long-context recall (train, dev, test_d<D> per distance).
#include <cstdio>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>

#include "cli/commands.h"
#include "data/generator.h"
#include "data/recall.h"

namespace shrike::cli {
namespace {

// "zh, en" -> {"zh", "en"}; empty items are kept so that the library reports them.
std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? comma : comma - start);
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    out.push_back(first == std::string::npos ? "" : item.substr(first, last - first + 1));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// "50,100,200" -> {50, 100, 200}; throws std::invalid_argument naming a bad item.
std::vector<int64_t> parse_distances(const std::string& list) {
  std::vector<int64_t> out;
  for (const std::string& item : split_list(list)) {
    size_t used = 0;
    int64_t d = -1;
    try {
      d = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw std::invalid_argument("--eval-distances: '" + item + "' is not a whole number");
    out.push_back(d);
  }
  return out;
}

struct GenArgs {
  std::string task = "intent", dir, langs = "zh,en", eval_distances = "50,100,200,400";
  int64_t n = 20000;
  uint64_t seed = 1;
  data::GeneratorOptions intent;
  data::RecallOptions recall;
};

int run_intent(GenArgs& a) {
  data::GeneratorOptions& options = a.intent;
  options.langs = split_list(a.langs);
  options.n_train = a.n;
  options.seed = a.seed;
  const data::GeneratedData generated = data::generate_dataset(options);
  data::write_dataset(generated, a.dir);
  std::set<std::string> intents, slots;
  for (const data::Example& e : generated.train) {
    intents.insert(e.intent);
    for (const auto& [name, value] : e.slots) slots.insert(name);
  }
  std::set<std::string> train_templates, test_templates;
  for (const data::ExampleOrigin& o : generated.train_origin) train_templates.insert(o.template_id);
  for (const data::ExampleOrigin& o : generated.test_origin) test_templates.insert(o.template_id);
  std::printf(
      "wrote %s: train %zu, dev %zu, test %zu, test_noisy %zu examples; %zu intents, %zu slot "
      "types; languages %s; %zu train / %zu test templates\n",
      a.dir.c_str(), generated.train.size(), generated.dev.size(), generated.test.size(),
      generated.test_noisy.size(), intents.size(), slots.size(), a.langs.c_str(),
      train_templates.size(), test_templates.size());
  return 0;
}

int run_recall(GenArgs& a) {
  data::RecallOptions& o = a.recall;
  o.n_train = a.n;
  o.seed = a.seed;
  o.eval_distances = parse_distances(a.eval_distances);
  const data::RecallData generated = data::generate_recall(o);
  data::write_recall(generated, a.dir);
  std::string tests;
  for (const auto& [d, examples] : generated.test)
    tests += " test_d" + std::to_string(d) + " " + std::to_string(examples.size()) + ",";
  if (!tests.empty()) tests.pop_back();
  std::printf(
      "wrote %s: recall, train %zu and dev %zu examples at distances %lld..%lld words;%s; "
      "decoy rate %.2f; %s keys\n",
      a.dir.c_str(), generated.train.size(), generated.dev.size(), (long long)o.min_distance,
      (long long)o.max_distance, tests.c_str(), o.decoy_rate,
      o.key_letters ? "digit-letter" : "digit");
  return 0;
}

}  // namespace

Runner add_data_gen(CLI::App& app) {
  auto a = std::make_shared<GenArgs>();
  app.add_option("--task", a->task, "dataset: intent (customer service) or recall (long context)")
      ->check(CLI::IsMember({"intent", "recall"}));
  app.add_option("--n,--n-train", a->n, "training examples (default 20000)")
      ->check(CLI::Range(int64_t(1), int64_t(10'000'000)));
  app.add_option("--seed", a->seed, "random seed");
  app.add_option("-o,--output,--out", a->dir, "output folder (created if missing)")->required();
  // intent
  CLI::Option* lang = app.add_option("--lang", a->langs,
                                     "intent: comma-separated languages: zh, en (default zh,en)");
  CLI::Option* noise = app.add_option("--noise", a->intent.noise,
                                      "intent: fraction of train/dev examples made noisy (0.15)");
  // recall
  const std::vector<CLI::Option*> recall_only = {
      app.add_option("--n-dev", a->recall.n_dev, "recall: dev examples (default 200)"),
      app.add_option("--n-test", a->recall.n_test,
                     "recall: test examples per evaluation distance (default 200)"),
      app.add_option("--min-distance", a->recall.min_distance,
                     "recall: fewest filler words between key and question in train/dev (20)"),
      app.add_option("--max-distance", a->recall.max_distance,
                     "recall: most filler words in train/dev (400)"),
      app.add_option("--eval-distances", a->eval_distances,
                     "recall: comma-separated distances of the test files (50,100,200,400)"),
      app.add_option("--decoy-rate", a->recall.decoy_rate,
                     "recall: chance that a filler sentence is a decoy key (0.08)"),
      app.add_flag("--key-letters", a->recall.key_letters,
                   "recall: keys like 4K7Q (digit, letter, digit, letter) instead of 4719")};
  return [a, lang, noise, recall_only] {
    if (a->task == "recall") {
      for (const CLI::Option* o : {lang, noise})
        if (o->count() > 0)
          throw std::invalid_argument(o->get_name() + " applies to --task intent only");
      return run_recall(*a);
    }
    for (const CLI::Option* o : recall_only)
      if (o->count() > 0)
        throw std::invalid_argument(o->get_name() + " applies to --task recall only");
    return run_intent(*a);
  };
}

}  // namespace shrike::cli
