// Calibration: what the inputs of every weight matrix look like on representative text. The
// full-precision model runs the calibration sequences (the trainer's forward pass keeps every
// activation) and each distinct matrix input is summarised: the mean magnitude of each channel
// (AWQ's salience), its Gram matrix XᵀX (GPTQ's Hessian) and a sample of rows (to measure the
// output error a candidate quantisation causes).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "train/transformer.h"

namespace shrike::quant {

struct InputStats {
  int64_t dim = 0;
  int64_t n_rows = 0;           // rows (token positions) seen
  std::vector<double> abs_sum;  // per channel: sum of |x|
  std::vector<double> gram;     // [dim][dim]: sum of x xᵀ (empty unless asked for)
  std::vector<float> sample;    // [sample_rows][dim]: rows spread evenly over the data
  int64_t sample_rows() const { return dim ? int64_t(sample.size()) / dim : 0; }
  std::vector<float> mean_abs() const;
};

struct CalibrationOptions {
  bool gram = false;
  int64_t max_sample_rows = 512;
  int64_t batch_tokens = 4096;  // tokens per forward call
};

// The matrices that read each input, by input key:
//   blk.N.attn_in     -> attn_q, attn_k, attn_v   (the attention RMSNorm's output)
//   blk.N.attn_out_in -> attn_output              (the heads' concatenated outputs)
//   blk.N.ffn_in      -> ffn_gate, ffn_up         (the FFN RMSNorm's output)
//   blk.N.ffn_down_in -> ffn_down                 (SiLU(gate) * up)
// The token embedding and the output matrix have no key (""): they are not calibrated.
std::string input_key(const std::string& tensor_name);

// Runs `model` over the sequences (each at most the model's context length) and summarises every
// input above. Throws std::invalid_argument when there is nothing to calibrate on.
std::map<std::string, InputStats> collect_input_stats(train::Transformer<float>& model,
                                                      const std::vector<std::vector<int32_t>>& seqs,
                                                      const CalibrationOptions& options,
                                                      ThreadPool& pool);

}  // namespace shrike::quant
