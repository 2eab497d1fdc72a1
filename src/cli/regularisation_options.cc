#include "cli/regularisation_options.h"

namespace shrike::cli {

void add_regularisation_options(CLI::App& app, train::TrainOptions& options) {
  app.add_option("--dropout", options.dropout,
                 "residual dropout in training: the fraction of each attention and FFN output "
                 "zeroed (0: none)")
      ->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  app.add_option("--prompt-loss", options.prompt_loss,
                 "weight of an auxiliary next-token loss on the utterance (0: the answer alone)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--ema", options.ema,
                 "keep an exponential moving average of the weights with this decay and write it "
                 "as the model (0: the last step's weights; 0.999 averages ~1,000 steps)")
      ->check(CLI::Range(0.0, 0.99999))
      ->capture_default_str();
}

}  // namespace shrike::cli
