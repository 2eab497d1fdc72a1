// `shrike convert HF_DIR -o OUT.gguf [--type f32|f16|bf16|q8_0]`: a Hugging Face folder
// (config.json, safetensors, tokenizer.json, tokenizer_config.json) as one GGUF file that shrike
// and llama.cpp both load, tokenizer and chat template included.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "gguf/gguf.h"
#include "model/hf_model.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace shrike::cli {
namespace {

struct ConvertArgs {
  std::string dir, out, type = "f16";
};

int run_convert(const ConvertArgs& a) {
  const auto ck = model::HfCheckpoint::open(a.dir);
  auto tok = tokenizer::load_hf_tokenizer(a.dir, ck.config().vocab_size);
  // Building the tokenizer checks what a loader of the GGUF would (merges, special ids).
  const tokenizer::Tokenizer check(tok.vocab);
  gguf::GgufWriter w;
  model::add_hf_model_to_gguf(ck, *dtype_from_name(a.type), w);
  tokenizer::add_vocab_to_gguf(tok.vocab, tok.chat_template, w);
  w.write(a.out);
  std::fprintf(stderr, "wrote %s: %s, %lld layers, %d tokens, %s weights%s\n", a.out.c_str(),
               ck.gguf_architecture().c_str(), static_cast<long long>(ck.config().n_layers),
               check.n_vocab(), a.type.c_str(), tok.chat_template.empty() ? "" : ", chat template");
  return 0;
}

}  // namespace

Runner add_convert(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  app.add_option("HF_DIR", a->dir,
                 "Hugging Face model folder (config.json, *.safetensors, "
                 "tokenizer.json)")
      ->required();
  app.add_option("-o,--output", a->out, "output .gguf path")->required();
  app.add_option("--type", a->type, "matrix type: f32|f16|bf16|q8_0 (vectors stay f32)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}));
  return [a] { return run_convert(*a); };
}

}  // namespace shrike::cli
