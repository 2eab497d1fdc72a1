// `shrike convert HF_DIR -o OUT.gguf [--type f32|f16|bf16|q8_0]`: a Hugging Face folder
// (config.json, safetensors, tokenizer.json, tokenizer_config.json) as one GGUF file that shrike
// and llama.cpp both load, tokenizer and chat template included; `shrike export-hf MODEL -o DIR`
// the other way, so a model shrike compressed goes back to the tools its user already has.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "gguf/gguf.h"
#include "model/hf_model.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/hf_tokenizer_writer.h"
#include "tokenizer/tokenizer.h"

namespace shrike::cli {
namespace {

struct ConvertArgs {
  std::string dir, out, type = "f16";
};

struct ExportArgs {
  std::string model, dir, type = "bf16";
};

int run_export(const ExportArgs& a) {
  const GgufInput in(a.model);
  const auto f = gguf::GgufFile::open(in.path());
  if (!f.has("tokenizer.ggml.tokens")) throw FileError(a.model + ": the model has no tokenizer");
  model::write_hf_model(f, a.dir, *dtype_from_name(a.type));
  tokenizer::write_hf_tokenizer(tokenizer::vocab_from_gguf(f), a.dir,
                                f.get_string_or("tokenizer.chat_template", ""));
  std::fprintf(stderr,
               "wrote %s: config.json, model.safetensors (%s), tokenizer.json, "
               "tokenizer_config.json\n",
               a.dir.c_str(), a.type.c_str());
  return 0;
}

int run_convert(const ConvertArgs& a) {
  const std::string what = convert_hf_folder(a.dir, a.out, *dtype_from_name(a.type));
  std::fprintf(stderr, "wrote %s: %s\n", a.out.c_str(), what.c_str());
  return 0;
}

}  // namespace

std::string convert_hf_folder(const std::string& dir, const std::string& path, DType type) {
  const auto ck = model::HfCheckpoint::open(dir);
  auto tok = tokenizer::load_hf_tokenizer(dir, ck.config().vocab_size);
  // Building the tokenizer checks what a loader of the GGUF would (merges, special ids).
  const tokenizer::Tokenizer check(tok.vocab);
  gguf::GgufWriter w;
  model::add_hf_model_to_gguf(ck, type, w);
  tokenizer::add_vocab_to_gguf(tok.vocab, tok.chat_template, w);
  w.write(path);
  return ck.gguf_architecture() + ", " + std::to_string(ck.config().n_layers) + " layers, " +
         std::to_string(check.n_vocab()) + " tokens, " + std::string(dtype_name(type)) +
         " weights" + (tok.chat_template.empty() ? "" : ", chat template");
}

DType hf_matrix_type(const std::string& dir) {
  const auto ck = model::HfCheckpoint::open(dir);
  for (const auto& t : ck.tensors())
    if (t.dims.size() == 2) return t.type;
  return DType::F32;
}

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

Runner add_export_hf(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  app.add_option("MODEL", a->model, "model: GGUF (any weight type) or Hugging Face folder")
      ->required();
  app.add_option("-o,--output", a->dir, "output folder (created)")->required();
  app.add_option("--type", a->type, "safetensors dtype: f32|f16|bf16")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  return [a] { return run_export(*a); };
}

}  // namespace shrike::cli
