// `shrike synth`: a random-weight Llama or Qwen2 model of any shape, as GGUF.
#include "model/synth.h"

#include <cstdio>
#include <memory>

#include "cli/commands.h"

namespace shrike::cli {

Runner add_synth(CLI::App& app) {
  auto o = std::make_shared<model::SynthOptions>();
  auto type = std::make_shared<std::string>("f16");
  auto out = std::make_shared<std::string>();
  app.add_option("--dim", o->dim, "embedding width")->required()->check(CLI::PositiveNumber);
  app.add_option("--layers", o->n_layers, "decoder blocks")->required()->check(CLI::PositiveNumber);
  app.add_option("--heads", o->n_heads, "attention heads")->required()->check(CLI::PositiveNumber);
  app.add_option("--kv-heads", o->n_kv_heads, "key/value heads (default: --heads)")
      ->check(CLI::PositiveNumber);
  app.add_option("--ffn", o->ffn_dim, "feed-forward width")->required()->check(CLI::PositiveNumber);
  app.add_option("--vocab", o->vocab, "vocabulary size")->check(CLI::PositiveNumber);
  app.add_option("--vocab-from", o->vocab_from, "copy the tokenizer from this GGUF");
  app.add_option("--vocab-type", o->vocab_type,
                 "synthetic vocabulary: spm (SentencePiece-style), qwen2 or llama-bpe (byte-level "
                 "BPE with that pre-tokenizer)")
      ->check(CLI::IsMember({"spm", "qwen2", "llama-bpe"}));
  app.add_option("--context", o->context_length, "context length")->check(CLI::PositiveNumber);
  app.add_option("--type", *type, "weight type: f32|f16|bf16|q8_0|q4_0")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0"}));
  app.add_option("--seed", o->seed, "random seed");
  app.add_flag("--tied", o->tied_output, "tie the output matrix to the token embedding");
  app.add_option("--arch", o->arch,
                 "llama, qwen2 (NeoX rotary, q/k/v biases), qwen3 (q/k norms), gemma2, gemma3 or "
                 "phi3 (fused q/k/v and gate/up, every layer sliding)")
      ->check(CLI::IsMember({"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"}));
  app.add_option("--head-dim", o->head_dim, "head dimension (default dim / heads)")
      ->check(CLI::PositiveNumber);
  app.add_option(
         "--sliding-window", o->sliding_window,
         "gemma, phi3: the sliding layers' window (default the real models': 4096 / 512 / 2047)")
      ->check(CLI::PositiveNumber);
  app.add_option("--rope-linear-factor", o->rope_linear_factor, "linear rope scaling factor")
      ->check(CLI::PositiveNumber);
  app.add_option("--yarn-factor", o->yarn_factor, "YaRN rope scaling factor (with --rope-original)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--longrope", o->longrope,
               "LongRoPE: random short and long factors (with --rope-original)");
  app.add_option("--rope-original", o->rope_original, "original context of YaRN / LongRoPE")
      ->check(CLI::PositiveNumber);
  app.add_option("--rope-theta", o->rope_theta, "rotary base frequency")
      ->check(CLI::PositiveNumber);
  app.add_option("--llama3-rope-factor", o->llama3_factor,
                 "Llama-3 rope scaling with this factor (low/high frequency factors 1 and 4)")
      ->check(CLI::PositiveNumber);
  app.add_option("--llama3-rope-original", o->llama3_original,
                 "original context of the Llama-3 rope scaling")
      ->check(CLI::PositiveNumber);
  app.add_option("-o,--output", *out, "output .gguf path")->required();
  auto kv_heads = app.get_option("--kv-heads");
  return [o, type, out, kv_heads] {
    if (kv_heads->count() == 0) o->n_kv_heads = o->n_heads;
    o->type = *dtype_from_name(*type);
    model::write_synth_model(*o, *out);
    std::fprintf(stderr, "wrote %s\n", out->c_str());
    return 0;
  };
}

}  // namespace shrike::cli
