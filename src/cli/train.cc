// `shrike train`: a from-scratch model for an intent/slot dataset (tokenizer included), with a
// progress line, dev accuracy per epoch, and a checkpoint to resume from.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/regularisation_options.h"
#include "cli/value_swap_options.h"
#include "core/thread_pool.h"
#include "data/example.h"
#include "gguf/gguf.h"
#include "task/task_definition.h"
#include "task/task_eval.h"
#include "task/task_format.h"
#include "task/task_training.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/presets.h"
#include "train/trainer.h"

namespace shrike::cli {
namespace {

struct TrainArgs {
  std::string data, dev, preset = "base", arch = "llama", tokenizer, out;
  int32_t vocab_size = 4096, merges = task::kTaskTokenizerMerges;
  train::TrainOptions opt;
  int threads = 0;
  bool resume = false;
  // Overrides of the preset's shape (0: the preset's value).
  train::ShapeOverrides shape;
  int64_t context = 0;
  data::ValueSwapOptions swap;
};

// A context that holds the longest training example with a quarter to spare (a longer utterance
// at serving time), in steps of 64: the preset's 256 is too short for some real datasets (SNIPS'
// longest utterance with its answer is 269 tokens at the default 160 merges).
int64_t context_for(const tokenizer::Vocab& vocab, const std::vector<data::Example>& examples) {
  const tokenizer::Tokenizer tok(vocab);
  int64_t longest = 0;
  for (const data::Example& ex : examples)
    longest = std::max<int64_t>(longest, int64_t(task::encode_task(tok, ex).tokens.size()));
  return (longest + longest / 4 + 63) / 64 * 64;
}

int run_train(TrainArgs a) {
  const auto train_set = data::read_examples(a.data);
  const auto dev_set = a.dev.empty() ? std::vector<data::Example>{} : data::read_examples(a.dev);
  ThreadPool pool(a.threads > 0 ? a.threads : default_thread_count());
  const std::string ckpt = train::checkpoint_path_for(a.out);
  a.opt.checkpoint_path = ckpt;

  std::unique_ptr<train::Transformer<float>> model;
  tokenizer::Vocab vocab;
  train::OptimizerState state;
  if (a.resume && std::filesystem::exists(ckpt)) {
    train::TrainableFile f = train::load_trainable(ckpt);
    model = std::move(f.model);
    vocab = std::move(f.vocab);
    state = std::move(f.state);
    std::fprintf(stderr, "train: resuming %s at step %lld\n", ckpt.c_str(), (long long)state.step);
  } else {
    if (!a.tokenizer.empty()) {
      vocab = tokenizer::vocab_from_gguf(gguf::GgufFile::open(a.tokenizer));
    } else {
      vocab = task::train_task_tokenizer(train_set,
                                         task::task_tokenizer_options(a.vocab_size, a.merges));
    }
    model::ModelConfig c = train::preset_config(a.preset, vocab.size());
    if (a.context > 0) {
      c.context_length = a.context;
    } else {
      c.context_length = std::max(c.context_length, context_for(vocab, train_set));
    }
    train::apply_shape(c, a.shape);
    train::apply_architecture(c, a.arch);
    c.bos_id = vocab.bos_id;
    c.eos_id = vocab.eos_id;
    model = std::make_unique<train::Transformer<float>>(c);
    model->init_random(a.opt.seed);
  }
  const tokenizer::Tokenizer tok(vocab);
  const model::ModelConfig& c = model->config();
  const int64_t params = train::param_count(model->layout());
  std::fprintf(
      stderr,
      "train: preset %s (%s): dim %lld, %lld layers, %lld heads (%lld kv) of %lld, ffn %lld, "
      "vocab %lld, context %lld; %.2fM parameters (%.2fM outside the embeddings); %zu examples, "
      "%d threads\n",
      a.preset.c_str(), c.architecture.c_str(), (long long)c.dim, (long long)c.n_layers,
      (long long)c.n_heads, (long long)c.n_kv_heads, (long long)c.head_dim, (long long)c.ffn_dim,
      (long long)c.vocab_size, (long long)c.context_length, double(params) / 1e6,
      double(train::body_param_count(c)) / 1e6, train_set.size(), pool.size());
  // The swapped copies join the examples after the tokenizer is trained: its pieces come from
  // the real utterances only.
  task::train_task(*model, tok, with_swapped_values(train_set, a.swap, a.opt.seed, "train"),
                   dev_set, a.opt, state, pool, [](const train::EpochReport& r) {
                     std::fprintf(stderr, "%s\n", train::describe(r).c_str());
                   });
  // The task travels with the model: serve constrains answers to it, eval and /v1/intent read it.
  const task::TaskDefinition task = task::task_definition_from(train_set);
  train::save_model(*model, vocab, a.opt.model_name, a.out, nullptr, task::task_metadata(task));
  std::fprintf(stderr, "train: wrote %s (checkpoint %s)\n", a.out.c_str(), ckpt.c_str());
  return 0;
}

}  // namespace

Runner add_train(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  app.add_option("--data", a->data, "training examples (JSONL)")->required();
  app.add_option("--dev", a->dev, "dev examples (JSONL): accuracy after each epoch");
  app.add_option("--preset", a->preset,
                 "model size (draft: a speculative-decoding draft; pass the target's --tokenizer)")
      ->check(CLI::IsMember({"tiny", "small", "base", "draft"}));
  app.add_option("--arch", a->arch,
                 "architecture: llama, or qwen2 (q/k/v biases, NeoX rotary, RoPE base 1e6, tied "
                 "output)")
      ->check(CLI::IsMember({"llama", "qwen2"}))
      ->capture_default_str();
  app.add_option("--dim", a->shape.dim, "override the preset's width")
      ->check(CLI::Range(8, 1 << 16));
  app.add_option("--layers", a->shape.layers, "override the preset's layer count")
      ->check(CLI::Range(1, 256));
  app.add_option("--heads", a->shape.heads, "override the preset's head count")
      ->check(CLI::Range(1, 1024));
  app.add_option("--kv-heads", a->shape.kv_heads, "override the preset's KV head count")
      ->check(CLI::Range(1, 1024));
  app.add_option("--ffn", a->shape.ffn, "override the preset's FFN width")
      ->check(CLI::Range(8, 1 << 20));
  app.add_option("--context", a->context,
                 "context length (default: the preset's 256, or more when the longest training "
                 "example needs it)")
      ->check(CLI::Range(16, 1 << 20));
  app.add_option("--tokenizer", a->tokenizer,
                 "tokenizer GGUF (default: train a BPE tokenizer on the data)");
  app.add_option("--vocab-size", a->vocab_size, "largest size of the trained tokenizer")
      ->check(CLI::Range(300, 1 << 20))
      ->capture_default_str();
  app.add_option("--merges", a->merges,
                 "most merged pieces of the trained tokenizer (-1: as many as --vocab-size "
                 "allows); few keep the tokens near characters, which a small model copies "
                 "into its answers far better")
      ->check(CLI::Range(-1, 1 << 20))
      ->capture_default_str();
  app.add_option("--epochs", a->opt.epochs, "passes over the data")->check(CLI::Range(1, 1000));
  add_value_swap_options(app, a->swap);
  add_regularisation_options(app, a->opt);
  app.add_option("--lr", a->opt.lr, "peak learning rate")->check(CLI::Range(1e-7, 1.0));
  app.add_option("--batch-tokens", a->opt.batch_tokens, "tokens per batch")
      ->check(CLI::Range(16, 1 << 20));
  app.add_option("--dev-limit", a->opt.dev_limit, "dev examples decoded per epoch")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", a->opt.seed, "initialisation and shuffling seed");
  app.add_option("-t,--threads", a->threads, "threads (default: all cores)");
  app.add_flag("--resume", a->resume, "continue from OUT's checkpoint when it exists");
  app.add_flag("!--no-progress", a->opt.progress, "no progress line");
  app.add_option("-o,--output", a->out, "model GGUF to write")->required();
  return [a] { return run_train(*a); };
}

}  // namespace shrike::cli
