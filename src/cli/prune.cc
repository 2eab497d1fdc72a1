// `shrike prune IN -o OUT --calib F [--heads R] [--ffn R] [--layers N] [--hidden R]`: a smaller
// standard GGUF, units ranked by importance on calibration examples.
#include "train/prune.h"

#include <cstdio>

#include "cli/commands.h"
#include "core/thread_pool.h"
#include "data/example.h"
#include "task/task_definition.h"
#include "task/task_training.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace shrike::cli {
namespace {

struct PruneArgs {
  std::string in, out, calib;
  train::PruneOptions opt;
  int64_t calib_limit = 1024;
  int threads = 0;
};

int run_prune(const PruneArgs& a) {
  train::TrainableFile f = train::load_trainable(a.in);
  const tokenizer::Tokenizer tok(f.vocab);
  auto calib = data::read_examples(a.calib);
  if (calib.empty()) throw std::invalid_argument(a.calib + ": no calibration examples");
  if (int64_t(calib.size()) > a.calib_limit) calib.resize(size_t(a.calib_limit));
  ThreadPool pool(a.threads > 0 ? a.threads : default_thread_count());

  std::vector<train::TrainingSequence> seqs;
  std::vector<int64_t> lengths;
  const task::PromptFormat format = task::prompt_format_of(task::task_of_model(a.in));
  for (const data::Example& ex : calib) {
    seqs.push_back(task::encode_task(tok, ex, format));
    lengths.push_back(int64_t(seqs.back().tokens.size()));
  }
  std::vector<train::TokenBatch> batches;
  for (const auto& idx : train::make_batches(lengths, 4096, 0, 0)) {
    batches.emplace_back();
    for (int64_t i : idx) batches.back().add(seqs[size_t(i)].tokens, seqs[size_t(i)].targets);
  }
  const train::Importance imp = train::measure_importance(*f.model, batches, pool);
  const auto pruned = train::prune_model(*f.model, imp, a.opt);
  train::save_model(*pruned, f.vocab, "shrike-pruned", a.out, nullptr,
                    task::task_metadata(task::task_of_model(a.in)), f.chat_template);

  auto body = [](const train::Transformer<float>& m) {
    return train::body_param_count(m.config());
  };
  const auto& c = pruned->config();
  std::fprintf(stderr,
               "prune: %lld layers, %lld heads (%lld kv), ffn %lld, dim %lld; parameters outside "
               "the embeddings %.2fM -> %.2fM (-%.1f%%); wrote %s\n",
               (long long)c.n_layers, (long long)c.n_heads, (long long)c.n_kv_heads,
               (long long)c.ffn_dim, (long long)c.dim, double(body(*f.model)) / 1e6,
               double(body(*pruned)) / 1e6,
               100.0 * (1.0 - double(body(*pruned)) / double(body(*f.model))), a.out.c_str());
  if (c.architecture == "qwen2" && c.q_dim() != c.dim)
    std::fprintf(stderr,
                 "prune: note: heads x head size (%lld) now differs from the width (%lld); shrike "
                 "runs this Qwen2 model, but llama.cpp's qwen2 graph assumes they are equal: "
                 "prune --heads and --hidden by the same fraction to keep it loadable there\n",
                 (long long)c.q_dim(), (long long)c.dim);
  return 0;
}

}  // namespace

Runner add_prune(CLI::App& app) {
  auto a = std::make_shared<PruneArgs>();
  app.add_option("input", a->in, "model: GGUF or Hugging Face folder")->required();
  app.add_option("-o,--output", a->out, "pruned model GGUF")->required();
  app.add_option("--calib", a->calib, "calibration examples (JSONL)")->required();
  app.add_option("--calib-limit", a->calib_limit, "calibration examples used")
      ->check(CLI::PositiveNumber);
  app.add_option("--heads", a->opt.heads,
                 "fraction of KV groups (with their query heads) to remove");
  app.add_option("--ffn", a->opt.ffn, "fraction of FFN channels to remove");
  app.add_option("--layers", a->opt.layers, "number of layers to remove");
  app.add_option("--hidden", a->opt.hidden, "fraction of hidden (residual) channels to remove");
  app.add_option("-t,--threads", a->threads, "threads (default: all cores)");
  return [a] { return run_prune(*a); };
}

}  // namespace shrike::cli
