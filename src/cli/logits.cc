// `shrike logits`: the logits of every position of a token sequence, as raw little-endian f32
// [n_tokens][vocab], for comparing shrike with another engine on the same GGUF (the other side
// writes the same layout: bench/experiments/llamacpp_logits.cc). The tokens are run as one
// prefill with an f32 KV cache, so the only differences left are the weights' kernels.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/kernel_options.h"
#include "cli/model_files.h"
#include "core/file_buffer.h"
#include "core/thread_pool.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"

namespace shrike::cli {
namespace {

struct LogitsArgs {
  std::string model, tokens, out;
  int threads = 1;
  bool bf16_dot = false;
};

std::vector<int32_t> read_token_ids(const std::string& path, int64_t vocab) {
  std::ifstream in(path);
  if (!in) throw FileError(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  std::vector<int32_t> ids = parse_token_ids(text.str(), vocab, path);
  if (ids.empty()) throw FileError(path + ": no token ids");
  return ids;
}

int run_logits(const LogitsArgs& a) {
  apply_bf16_dot(a.bf16_dot);
  const auto m = model::load_model(a.model);
  const auto& c = m->config();
  const std::vector<int32_t> ids = read_token_ids(a.tokens, c.vocab_size);
  const int64_t n = int64_t(ids.size());
  if (n > c.context_length)
    throw FileError(a.tokens + ": " + std::to_string(n) +
                    " tokens, more than the model's context of " +
                    std::to_string(c.context_length));
  ThreadPool pool(a.threads);
  kv::ContiguousKvCache kv(c.n_layers, n, c.n_kv_heads, c.head_dim);
  std::vector<float> logits(size_t(n * c.vocab_size));
  m->forward(ids.data(), n, 0, kv, n, logits.data(), pool);
  std::ofstream out(a.out, std::ios::binary);
  out.write(reinterpret_cast<const char*>(logits.data()), std::streamsize(logits.size() * 4));
  if (!out) throw FileError(a.out + ": cannot write");
  std::fprintf(stderr, "%lld tokens x %lld logits -> %s\n", (long long)n, (long long)c.vocab_size,
               a.out.c_str());
  return 0;
}

}  // namespace

Runner add_logits(CLI::App& app) {
  auto a = std::make_shared<LogitsArgs>();
  app.add_option("-m,--model", a->model, "model: GGUF, llama2.c .bin or Hugging Face folder")
      ->required();
  app.add_option("--tokens", a->tokens, "token ids, whitespace-separated (shrike tokenize)")
      ->required();
  app.add_option("-o,--out", a->out, "output: f32 logits [tokens][vocab], little-endian")
      ->required();
  app.add_option("-t,--threads", a->threads, "threads")->check(CLI::Range(1, 256));
  add_bf16_dot_flag(app, a->bf16_dot);
  return [a] { return run_logits(*a); };
}

}  // namespace shrike::cli
