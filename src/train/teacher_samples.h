// A teacher's own text as training data: when a draft model must be distilled from a model whose
// training text is not at hand (stories260K), the teacher's samples are the text it was trained
// to produce, and training on them with the KL term teaches the draft the teacher's distribution
// where the teacher actually goes.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "train/trainer.h"

namespace shrike::train {

struct TeacherSampleOptions {
  int64_t count = 1000;      // sequences
  int64_t length = 256;      // tokens after BOS, at most (a sample also ends at EOS or BOS)
  float temperature = 1.0f;  // 1: the teacher's own distribution
  uint64_t seed = 1;         // sample i draws from a generator seeded by (seed, i) alone
  int64_t batch = 64;        // sequences decoded together
};

// count sequences [BOS, t1, t2, ...] sampled from the model, each ending after length tokens or
// at the first EOS or BOS it samples (which stays in: a draft must predict the end too; llama2.c
// models end a story with BOS). Deterministic for the options: each sample has its own seeded
// generator, so the samples do not depend on the batch size. Throws std::invalid_argument for a
// count or length below 1, a length that does not fit the model's context, or a temperature <= 0.
std::vector<std::vector<int32_t>> sample_from_teacher(const model::Model& teacher,
                                                      const TeacherSampleOptions& opt,
                                                      ThreadPool& pool);

// Language-model training sequences: every position predicts the token after it.
std::vector<TrainingSequence> next_token_sequences(
    const std::vector<std::vector<int32_t>>& samples);

}  // namespace shrike::train
