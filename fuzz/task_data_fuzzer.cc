// Task-data readers (src/data): the examples JSONL, each public-dataset importer, the tolerant
// parser of a model's answer and the recall text. The first byte picks the reader.
#include <cstdint>
#include <optional>
#include <string>

#include "core/file_buffer.h"
#include "data/example.h"
#include "data/importers.h"
#include "data/recall.h"
#include "fuzz_input.h"
#include "task/task_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shrike;
  if (size < 1) return 0;
  const std::string_view rest = fuzz::as_text(data + 1, size - 1);
  // File names as the importers expect them (xSID takes the language from the name).
  struct Reader {
    const char* file;
    std::optional<data::DatasetFormat> format;
    const char* split;
  };
  static const Reader kReaders[] = {
      {"examples.jsonl", std::nullopt, ""},
      {"banking77.csv", data::DatasetFormat::Banking77, ""},
      {"data_full.json", data::DatasetFormat::Clinc150, "all"},
      {"snips.json", data::DatasetFormat::Snips, ""},
      {"nlupp.json", data::DatasetFormat::Nlupp, ""},
      {"hint3.csv", data::DatasetFormat::Hint3, ""},
      {"bitext.csv", data::DatasetFormat::Bitext, ""},
      {"zh.valid.conll", data::DatasetFormat::Xsid, ""},
  };
  const unsigned pick = data[0] % 10;
  if (pick == 8) {
    (void)task::parse_task_answer(rest);
    return 0;
  }
  if (pick == 9) {
    try {
      (void)data::parse_recall_text(std::string(rest));
    } catch (const std::invalid_argument&) {
    }
    return 0;
  }
  const Reader& r = kReaders[pick];
  const std::string path = fuzz::write_file(r.file, rest);
  try {
    if (r.format)
      (void)data::import_dataset(*r.format, path, r.split);
    else
      (void)data::read_examples(path);
  } catch (const FileError&) {
  }
  return 0;
}
