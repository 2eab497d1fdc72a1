// `shrike trim-vocab IN -o OUT --keep-from DATA.jsonl [--keep-from MORE.jsonl] [--extra FILE]`:
// a copy of a model with only the tokens a task uses (its prompts and answers as the task
// formats them, byte fallbacks, specials, --extra pieces, and the merges that build them).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "core/file_buffer.h"
#include "core/jsonl.h"
#include "data/example.h"
#include "gguf/gguf.h"
#include "model/vocab_trim.h"
#include "task/task_definition.h"
#include "task/task_format.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_trim.h"

namespace shrike::cli {
namespace {

struct TrimVocabArgs {
  std::string in, out, extra;
  std::vector<std::string> keep_from;
};

// The texts a model reads and writes for one DATA file: labelled examples (an "intent" on the
// first record) give their task prompt and answer, as training encodes them; other files are
// {"text": ...} documents.
void add_texts(const std::string& path, const task::PromptFormat& format,
               std::vector<std::string>& texts) {
  bool task = false;
  for_each_jsonl_object_in_file(
      path, [&](const nlohmann::json& j, const std::string&) { task = j.contains("intent"); }, 1);
  if (task) {
    for (const data::Example& ex : data::read_examples(path)) {
      texts.push_back(format.text(ex.text));
      texts.push_back(task::task_answer(ex));
    }
    return;
  }
  for_each_jsonl_object_in_file(path, [&](const nlohmann::json& j, const std::string& where) {
    const auto it = j.find("text");
    if (it == j.end() || !it->is_string())
      throw FileError(where + "no \"text\" string (a task example or a text document)");
    texts.push_back(it->get<std::string>());
  });
}

// --extra: one vocabulary piece per line, exactly as tokenizer.ggml.tokens spells it ("▁Paris",
// "<0x0A>"); blank lines are skipped.
std::vector<int32_t> read_extra(const std::string& path, const tokenizer::Vocab& v) {
  std::ifstream in(path);
  if (!in) throw FileError(path + ": cannot open");
  std::unordered_map<std::string, int32_t> ids;
  for (int32_t id = v.size() - 1; id >= 0; --id) ids[v.pieces[size_t(id)]] = id;  // first wins
  std::vector<int32_t> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto it = ids.find(line);
    if (it == ids.end())
      throw FileError(path + ":" + std::to_string(n) + ": '" + line +
                      "' is not a piece of the vocabulary");
    out.push_back(it->second);
  }
  return out;
}

std::vector<std::string> pieces_of(const tokenizer::Tokenizer& tok, const std::string& text) {
  std::vector<std::string> p;
  for (int32_t id : tok.encode(text, false)) p.push_back(tok.vocab().pieces[size_t(id)]);
  return p;
}

int run_trim_vocab(const TrimVocabArgs& a) {
  const GgufInput input(a.in);  // a Hugging Face folder becomes a GGUF first
  const gguf::GgufFile in = gguf::GgufFile::open(input.path());
  if (!in.has("tokenizer.ggml.tokens"))
    throw FileError(a.in +
                    ": no vocabulary (tokenizer.ggml.tokens): trim-vocab needs a model "
                    "that carries its tokenizer");
  const tokenizer::Tokenizer tok(tokenizer::vocab_from_gguf(in));
  std::vector<std::string> texts;
  // Task examples as the model's task prompts them (its own format, when it was given one).
  const task::PromptFormat format = task::prompt_format_of(task::task_from_gguf(in));
  for (const std::string& path : a.keep_from) add_texts(path, format, texts);
  // A model that carries its task (shrike.task.*) is served constrained to that task's answers:
  // every label and slot name must keep the pieces its answers use, even if DATA misses one.
  if (const auto task = task::task_from_gguf(in)) {
    for (const std::string& intent : task->intents)
      texts.push_back(task::task_answer({.text = "", .intent = intent, .slots = {}, .lang = ""}));
    for (const std::string& slot : task->slots)
      texts.push_back(
          task::task_answer({.text = "", .intent = "", .slots = {{slot, ""}}, .lang = ""}));
  }
  if (texts.empty()) throw std::invalid_argument("trim-vocab: --keep-from holds no text");
  std::vector<int32_t> extra = model::special_token_ids(in);
  if (!a.extra.empty())
    for (int32_t id : read_extra(a.extra, tok.vocab())) extra.push_back(id);

  const std::vector<int32_t> kept = tokenizer::tokens_to_keep(tok, texts, extra);
  const tokenizer::Vocab& vocab = tok.vocab();
  const std::vector<std::string> merges = tokenizer::kept_merges(vocab.pieces, vocab.merges, kept);
  const model::VocabTrimStats st = model::trim_model_vocab(
      in, kept, a.out, vocab.kind == tokenizer::VocabKind::Bpe ? &merges : nullptr);

  // The property trimming promises, checked on what was written: every kept text has the same
  // pieces under the new vocabulary.
  const tokenizer::Tokenizer trimmed(tokenizer::vocab_from_gguf(gguf::GgufFile::open(a.out)));
  for (const std::string& text : texts)
    if (pieces_of(tok, text) != pieces_of(trimmed, text))
      throw std::logic_error("trim-vocab: \"" + text +
                             "\" tokenizes differently after trimming (a bug: please report)");

  const auto size_in = std::filesystem::file_size(input.path()),
             size_out = std::filesystem::file_size(a.out);
  std::fprintf(stderr,
               "trim-vocab: %lld -> %lld tokens (%.1fx fewer); parameters %.2fM -> %.2fM; file "
               "%.2f MB -> %.2f MB; %zu texts tokenize as before; wrote %s\n",
               (long long)st.vocab_before, (long long)st.vocab_after,
               double(st.vocab_before) / double(st.vocab_after), double(st.params_before) / 1e6,
               double(st.params_after) / 1e6, double(size_in) / 1e6, double(size_out) / 1e6,
               texts.size(), a.out.c_str());
  return 0;
}

}  // namespace

Runner add_trim_vocab(CLI::App& app) {
  auto a = std::make_shared<TrimVocabArgs>();
  app.add_option("input", a->in,
                 "model: GGUF or Hugging Face folder (SentencePiece, byte-level BPE or WordPiece "
                 "vocabulary)")
      ->required();
  app.add_option("-o,--output", a->out, "trimmed model GGUF")->required();
  app.add_option("--keep-from", a->keep_from,
                 "JSONL whose texts must keep their tokens: task examples (prompt and answer) or "
                 "{\"text\": ...} documents; repeatable")
      ->required();
  app.add_option("--extra", a->extra, "file of further pieces to keep, one per line");
  return [a] { return run_trim_vocab(*a); };
}

}  // namespace shrike::cli
