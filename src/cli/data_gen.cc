// `shrike data gen`: the built-in customer-service intent/slot dataset, as four JSONL files.
#include <cstdio>
#include <memory>
#include <set>
#include <string>

#include "cli/commands.h"
#include "data/generator.h"

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

}  // namespace

Runner add_data_gen(CLI::App& app) {
  auto options = std::make_shared<data::GeneratorOptions>();
  auto langs = std::make_shared<std::string>("zh,en");
  auto dir = std::make_shared<std::string>();
  app.add_option("--lang", *langs, "comma-separated languages: zh, en (default zh,en)");
  app.add_option("--n", options->n_train, "training examples (default 20000); dev/test get n/10");
  app.add_option("--noise", options->noise, "fraction of train/dev examples made noisy (0.15)");
  app.add_option("--seed", options->seed, "random seed (data and template split)");
  app.add_option("-o,--output", *dir, "output folder (created if missing)")->required();
  return [options, langs, dir] {
    options->langs = split_list(*langs);
    const data::GeneratedData generated = data::generate_dataset(*options);
    data::write_dataset(generated, *dir);
    std::set<std::string> intents, slots;
    for (const data::Example& e : generated.train) {
      intents.insert(e.intent);
      for (const auto& [name, value] : e.slots) slots.insert(name);
    }
    std::set<std::string> train_templates, test_templates;
    for (const data::ExampleOrigin& o : generated.train_origin)
      train_templates.insert(o.template_id);
    for (const data::ExampleOrigin& o : generated.test_origin) test_templates.insert(o.template_id);
    std::printf(
        "wrote %s: train %zu, dev %zu, test %zu, test_noisy %zu examples; %zu intents, %zu slot "
        "types; languages %s; %zu train / %zu test templates\n",
        dir->c_str(), generated.train.size(), generated.dev.size(), generated.test.size(),
        generated.test_noisy.size(), intents.size(), slots.size(), langs->c_str(),
        train_templates.size(), test_templates.size());
    return 0;
  };
}

}  // namespace shrike::cli
