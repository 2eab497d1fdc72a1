// `shrike data import --format F FILE -o OUT.jsonl`: a public intent/slot dataset (shared/data/)
// to the Example JSONL that train and eval read, with a summary of what was imported.
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "cli/commands.h"
#include "core/file_buffer.h"
#include "data/importers.h"

namespace shrike::cli {
namespace {

struct ImportArgs {
  std::string format, input, output, split;
};

int run_import(const ImportArgs& a) {
  const data::DatasetFormat format = data::parse_dataset_format(a.format);
  const std::vector<data::Example> examples = data::import_dataset(format, a.input, a.split);
  if (examples.empty()) throw FileError(a.input + ": no examples found");
  data::write_examples(examples, a.output);
  std::set<std::string> intents, slot_types;
  std::map<std::string, int64_t> langs;
  int64_t with_slots = 0;
  for (const data::Example& ex : examples) {
    intents.insert(ex.intent);
    for (const auto& [name, value] : ex.slots) slot_types.insert(name);
    with_slots += !ex.slots.empty();
    ++langs[ex.lang];
  }
  std::printf("%s: %zu examples, %zu intents, %zu slot types (%lld examples with slots)\n",
              a.input.c_str(), examples.size(), intents.size(), slot_types.size(),
              (long long)with_slots);
  for (const auto& [lang, n] : langs)
    std::printf("  lang %s: %lld\n", lang.empty() ? "(unknown)" : lang.c_str(), (long long)n);
  std::printf("wrote %s\n", a.output.c_str());
  return 0;
}

}  // namespace

Runner add_data_import(CLI::App& app) {
  auto a = std::make_shared<ImportArgs>();
  app.add_option("--format", a->format, "dataset format")
      ->required()
      ->check(
          CLI::IsMember({"banking77", "clinc150", "snips", "nlupp", "hint3", "bitext", "xsid"}));
  app.add_option("input", a->input, "dataset file (snips and nlupp: also a folder of .json files)")
      ->required();
  app.add_option("-o,--output", a->output, "output JSONL file")->required();
  app.add_option("--split", a->split,
                 "clinc150 only: train (+ oos_train), val/dev (+ oos_val) or all");
  return [a] { return run_import(*a); };
}

}  // namespace shrike::cli
