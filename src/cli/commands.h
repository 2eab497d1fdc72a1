// The `shrike` subcommands. Each registers its options on the CLI11 app and returns the function
// that runs it (exit code).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace shrike::cli {

using Runner = std::function<int()>;

Runner add_generate(CLI::App& app);
Runner add_synth(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_loadtest(CLI::App& app);
Runner add_tokenize(CLI::App& app);
Runner add_logits(CLI::App& app);  // logits.cc
Runner add_convert(CLI::App& app);
Runner add_export_hf(CLI::App& app);
Runner add_serve(CLI::App& app);
Runner add_data(CLI::App& app);         // data.cc: the `data` group
Runner add_data_gen(CLI::App& app);     // data_gen.cc
Runner add_data_import(CLI::App& app);  // data_import.cc
Runner add_data_split(CLI::App& app);   // data_split.cc
Runner add_tokenizer(CLI::App& app);    // tokenizer_train.cc: `tokenizer train`
Runner add_train(CLI::App& app);        // train.cc
Runner add_eval(CLI::App& app);         // eval.cc
Runner add_prune(CLI::App& app);        // prune.cc
Runner add_distill(CLI::App& app);      // distill.cc
Runner add_quantize(CLI::App& app);     // quantize.cc
Runner add_trim_vocab(CLI::App& app);   // trim_vocab.cc
Runner add_task(CLI::App& app);         // task.cc: `task show|set`
Runner add_max_rate(CLI::App& app);     // max_rate.cc
Runner add_soak(CLI::App& app);         // soak.cc
// optimize.cc; argv is recorded in the report as the command that produced it
Runner add_optimize(CLI::App& app, int argc, char** argv);

}  // namespace shrike::cli
