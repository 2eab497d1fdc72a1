// shrike: one binary, one subcommand per job. This file only parses arguments and maps errors to
// exit codes: 2 for bad input files (with a one-line message naming the file), 1 for the rest.
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "cli/commands.h"
#include "core/file_buffer.h"

int main(int argc, char** argv) {
  CLI::App app{"shrike: fast, measured LLM inference on CPU"};
  app.require_subcommand(1);
  std::map<CLI::App*, shrike::cli::Runner> runners;
  auto add = [&](const char* name, const char* help, auto adder) {
    CLI::App* sub = app.add_subcommand(name, help);
    runners[sub] = adder(*sub);
  };
  add("generate", "generate text from a prompt", shrike::cli::add_generate);
  add("synth", "write a random-weight Llama model of any shape as GGUF", shrike::cli::add_synth);
  add("bench", "measure prefill and decode speed (and the memory roofline)",
      shrike::cli::add_bench);
  add("tokenize", "text to token ids, or ids to text", shrike::cli::add_tokenize);
  add("logits", "every position's logits of a token sequence, as raw f32 (engine cross-checks)",
      shrike::cli::add_logits);
  add("convert", "convert a Hugging Face model folder to GGUF", shrike::cli::add_convert);
  add("export-hf", "write a model as a Hugging Face folder (config.json, safetensors, tokenizer)",
      shrike::cli::add_export_hf);
  add("serve", "serve a model over an OpenAI-compatible HTTP API", shrike::cli::add_serve);
#if !SHRIKE_EDGE_COMMANDS_ONLY  // the static edge build leaves out what needs outside libraries
  add("data", "generate or import intent/slot datasets", shrike::cli::add_data);
  add("tokenizer", "train a BPE tokenizer on a dataset", shrike::cli::add_tokenizer);
  add("train", "train a model on an intent/slot dataset", shrike::cli::add_train);
  add("prune", "remove heads, FFN channels, layers or hidden channels of a model",
      shrike::cli::add_prune);
  add("distill", "train a student model from a teacher's outputs", shrike::cli::add_distill);
  add("eval", "evaluate a model: perplexity and KL against a reference, task accuracy",
      shrike::cli::add_eval);
  add("quantize", "quantise a model's weights (RTN, AWQ or GPTQ) to another GGUF",
      shrike::cli::add_quantize);
  add("trim-vocab", "keep only the tokens a task uses: a smaller vocabulary, same text in and out",
      shrike::cli::add_trim_vocab);
  add("task", "show or attach the intent/slot task a model carries (labels, slot names, prompt)",
      shrike::cli::add_task);
  add("loadtest", "measure an OpenAI-compatible server under load", shrike::cli::add_loadtest);
  add("max-rate",
      "the highest bursty arrival rate a server sustains within a latency budget (as optimize "
      "measures each stage)",
      shrike::cli::add_max_rate);
  add("soak",
      "mixed and hostile traffic against shrike serve for a bounded time, with a verdict per "
      "criterion (errors, lost requests, memory growth, KV blocks, /health)",
      shrike::cli::add_soak);
  add("optimize",
      "build, serve and measure every optimisation stage of a task model: the staged report",
      [&](CLI::App& sub) { return shrike::cli::add_optimize(sub, argc, argv); });
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 1;
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const shrike::FileError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 1;
}
