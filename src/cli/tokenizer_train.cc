// `shrike tokenizer train`: a SentencePiece-style BPE vocabulary (or with --byte-level, a
// byte-level BPE one as Qwen2 and Llama-3 ship) learned from intent/slot JSONL datasets, written as
// a GGUF holding only the tokenizer keys (training copies it into models). It learns from each
// example's text and, so that the answers a model writes stay short, from its intent name and slot
// names, quoted as they appear in the JSON answer ("order_status").
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/file_buffer.h"
#include "data/example.h"
#include "task/task_eval.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/byte_bpe_trainer.h"
#include "tokenizer/tokenizer.h"

namespace shrike::cli {
namespace {

struct TokenizerTrainArgs {
  std::vector<std::string> data;
  std::string output;
  tokenizer::BpeTrainOptions opt;
  bool keep_digits_apart = true, keep_spaces_apart = true, keep_cjk_apart = true;
  bool byte_level = false;
  std::string pre = "qwen2";
};

int run_tokenizer_train(const TokenizerTrainArgs& a) {
  std::vector<data::Example> examples;
  for (const std::string& path : a.data) {
    std::vector<data::Example> part = data::read_examples(path);
    if (part.empty()) throw FileError(path + ": no examples");
    examples.insert(examples.end(), part.begin(), part.end());
  }
  tokenizer::BpeTrainOptions opt = a.opt;
  opt.split_digits = a.keep_digits_apart;
  opt.split_space = a.keep_spaces_apart;
  opt.split_cjk = a.keep_cjk_apart;
  const auto t0 = std::chrono::steady_clock::now();
  tokenizer::Vocab vocab;
  if (a.byte_level) {
    tokenizer::ByteBpeTrainOptions bo;
    bo.vocab_size = a.opt.vocab_size;
    bo.min_frequency = a.opt.min_frequency;
    bo.max_piece_bytes = a.opt.max_piece_chars;
    bo.pre = a.pre;
    vocab = tokenizer::train_byte_level_bpe(task::task_tokenizer_texts(examples), bo);
  } else {
    // The same tokenizer `shrike train` builds: trained on the task's prompts and answers.
    vocab = task::train_task_tokenizer(examples, opt);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tokenizer::write_tokenizer_gguf(vocab, a.output);

  // How compact the examples' texts encode, per language ("" when the dataset does not say).
  const tokenizer::Tokenizer tok(std::move(vocab));
  std::map<std::string, std::pair<int64_t, int64_t>> per_lang;  // lang -> texts, tokens
  for (const data::Example& ex : examples) {
    auto& [n, tokens] = per_lang[ex.lang];
    ++n;
    tokens += int64_t(tok.encode(ex.text, false).size());
  }
  std::printf("%s: %d tokens from %zu examples in %.2f s\n", a.output.c_str(), tok.n_vocab(),
              examples.size(), secs);
  for (const auto& [lang, nt] : per_lang)
    std::printf("  %-4s %7lld texts, %.2f tokens per text\n", lang.empty() ? "?" : lang.c_str(),
                static_cast<long long>(nt.first), double(nt.second) / double(nt.first));
  return 0;
}

}  // namespace

Runner add_tokenizer(CLI::App& app) {
  app.require_subcommand(1);
  auto* train = app.add_subcommand("train", "learn a BPE vocabulary from JSONL examples");
  auto a = std::make_shared<TokenizerTrainArgs>();
  train->add_option("--data", a->data, "JSONL example files (comma-separated or repeated)")
      ->required()
      ->delimiter(',');
  train->add_option("-o,--output", a->output, "tokenizer GGUF to write")->required();
  train->add_option("--vocab-size", a->opt.vocab_size, "largest vocabulary size (pieces)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  train
      ->add_option("--max-merges", a->opt.max_merges,
                   "most merged pieces (-1: as many as --vocab-size allows)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 24));
  train
      ->add_option("--min-frequency", a->opt.min_frequency,
                   "times a character or pair must occur to enter the vocabulary")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  train
      ->add_option("--max-piece-chars", a->opt.max_piece_chars,
                   "longest merged piece, in characters")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  train->add_flag("--byte-level", a->byte_level,
                  "a byte-level BPE vocabulary (tokenizer.ggml.model gpt2, as Qwen2 and Llama-3): "
                  "--vocab-size counts its 256 bytes and 3 special tokens, --max-piece-chars "
                  "counts bytes, --max-merges and the --merge-* flags do not apply");
  train->add_option("--pre", a->pre, "pre-tokenizer of --byte-level (tokenizer.ggml.pre)")
      ->capture_default_str();
  train->add_flag("!--merge-digits", a->keep_digits_apart,
                  "let digits merge into multi-digit pieces (default: one token per digit)");
  train->add_flag("!--merge-spaces", a->keep_spaces_apart,
                  "let the space mark merge with the word after it (default: its own token)");
  train->add_flag("!--merge-cjk", a->keep_cjk_apart,
                  "let CJK characters merge (default: one token per character)");
  return [=] { return run_tokenizer_train(*a); };
}

}  // namespace shrike::cli
