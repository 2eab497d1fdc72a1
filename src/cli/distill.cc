// `shrike distill --teacher T (--student S | --student-preset P) --data F -o OUT`: trains the
// student (pruned from the teacher, or fresh at a preset's shape with the teacher's tokenizer,
// e.g. a speculative-decoding draft) on
// alpha * KL(teacher || student at temperature) + (1 - alpha) * cross-entropy on the labels,
// optionally on teacher-labelled extra utterances, then optionally fine-tunes on the labels.
// With --teacher-samples N instead of --data, the text is the teacher's own: N sequences sampled
// from BOS (a draft for a model whose training text is not at hand, e.g. stories260K), every
// position carrying the loss.
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "cli/regularisation_options.h"
#include "cli/value_swap_options.h"
#include "core/thread_pool.h"
#include "data/example.h"
#include "model/model.h"
#include "task/task_definition.h"
#include "task/task_eval.h"
#include "task/task_scores.h"
#include "task/task_training.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/inference_model.h"
#include "train/presets.h"
#include "train/teacher_samples.h"
#include "train/trainer.h"

namespace shrike::cli {
namespace {

struct DistillArgs {
  std::string teacher, student, student_preset, data, dev, unlabeled, out;
  train::ShapeOverrides shape;                      // of a --student-preset student
  train::TeacherSampleOptions samples{.count = 0};  // count > 0: train on the teacher's samples
  train::TrainOptions opt;
  int64_t finetune_epochs = 0;
  double finetune_lr = 2e-4;
  int threads = 0;
  data::ValueSwapOptions swap;
};

// The label-only epochs after distillation: no teacher, their own count, rate and seed.
train::TrainOptions finetune_options(const DistillArgs& a) {
  train::TrainOptions ft = a.opt;
  ft.teacher = nullptr;
  ft.epochs = a.finetune_epochs;
  ft.lr = a.finetune_lr;
  ft.seed = a.opt.seed + 1;
  return ft;
}

// The student answers like the teacher: its own file's template, else the teacher's.
const std::string& chat_template_of(const train::TrainableFile& student,
                                    const train::TrainableFile& teacher) {
  return student.chat_template.empty() ? teacher.chat_template : student.chat_template;
}

// Writing the student copies its parameters once more; what training held goes first (the
// teacher, gradients, activations, optimizer moments), so that the peak is training's.
// The student answers the teacher's task (its own file's, when it had one, is the same task).
std::optional<task::TaskDefinition> carried_task(const DistillArgs& a) {
  if (!a.student.empty())
    if (auto t = task::task_of_model(a.student)) return t;
  return task::task_of_model(a.teacher);
}

void release_training_memory(train::TrainableFile& teacher, train::TrainableFile& student,
                             train::OptimizerState& state) {
  teacher.model.reset();
  student.model->release_gradients();
  student.model->release_activations();
  state = {};
}

// What training will hold, so that a large model's run can be sized before it starts: the
// teacher's parameters, the student's with gradients and AdamW moments for what trains, and
// the student's activations at --batch-tokens.
void report_memory(const train::Transformer<float>& teacher,
                   const train::Transformer<float>& student, const train::TrainOptions& opt) {
  const double gb = 1e9;
  const int64_t p = int64_t(student.params().size());
  const int64_t trainable = opt.freeze_embeddings ? p - student.layout().front().size() *
                                                            (student.config().tied_output ? 1 : 2)
                                                  : p;
  std::fprintf(stderr,
               "distill: memory: teacher %.2f GB, student %.2f GB + gradients and moments "
               "%.2f GB (%.0fM trainable%s), activations ~%.2f GB at %lld tokens a batch\n",
               double(teacher.params().size()) * 4 / gb, double(p) * 4 / gb,
               double(trainable) * 12 / gb, double(trainable) / 1e6,
               opt.freeze_embeddings ? ", embeddings frozen" : "",
               double(train::activation_bytes_per_token(student.config()) * opt.batch_tokens) / gb,
               (long long)opt.batch_tokens);
}

void report(const char* stage, const train::EpochReport& r) {
  std::fprintf(stderr, "%s %s\n", stage, train::describe(r).c_str());
}

// The teacher's own samples as the text, the file's model (as served, any weight type) drawing
// them; then the usual loss on every position.
int distill_on_samples(const DistillArgs& a, train::TrainableFile& teacher,
                       train::TrainableFile& student, ThreadPool& pool) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto served = model::load_model(a.teacher);
  train::TeacherSampleOptions so = a.samples;
  so.seed = a.opt.seed;
  const auto samples = train::sample_from_teacher(*served, so, pool);
  int64_t tokens = 0;
  for (const auto& s : samples) tokens += int64_t(s.size());
  std::fprintf(stderr,
               "distill: %zu teacher samples (temperature %.2f, up to %lld tokens), %lld tokens, "
               "%.1f s\n",
               samples.size(), double(a.samples.temperature), (long long)a.samples.length,
               (long long)tokens,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  const auto seqs = train::next_token_sequences(samples);
  train::OptimizerState state;
  train::train_sequences(*student.model, student.vocab, seqs, a.opt, state, pool, {},
                         [](const train::EpochReport& r) { report("distill", r); });
  if (a.finetune_epochs > 0) {
    const train::TrainOptions ft = finetune_options(a);
    train::OptimizerState ft_state;
    train::train_sequences(*student.model, student.vocab, seqs, ft, ft_state, pool, {},
                           [](const train::EpochReport& r) { report("fine-tune", r); });
  }
  const std::string chat_template = chat_template_of(student, teacher);
  release_training_memory(teacher, student, state);
  train::save_model(*student.model, student.vocab, a.opt.model_name, a.out, nullptr,
                    task::task_metadata(carried_task(a)), chat_template);
  std::fprintf(stderr, "distill: wrote %s\n", a.out.c_str());
  return 0;
}

int run_distill(DistillArgs a) {
  if (a.student_preset.empty() &&
      (a.shape.dim || a.shape.layers || a.shape.heads || a.shape.kv_heads || a.shape.ffn))
    throw std::invalid_argument(
        "distill: --dim, --layers, --heads, --kv-heads and --ffn shape a --student-preset "
        "student, not a --student file");
  if (a.samples.count > 0 && (!a.dev.empty() || !a.unlabeled.empty()))
    throw std::invalid_argument(
        "distill: --dev and --unlabeled are task data; --teacher-samples trains on plain text");
  train::TrainableFile teacher = train::load_trainable(a.teacher);
  train::TrainableFile student;
  if (!a.student_preset.empty()) {
    const model::ModelConfig c =
        train::student_config(a.student_preset, teacher.model->config(), a.shape);
    student.model = std::make_unique<train::Transformer<float>>(c);
    student.model->init_random(a.opt.seed);
    student.vocab = teacher.vocab;
    std::fprintf(
        stderr,
        "distill: fresh %s student: dim %lld, %lld layers, %lld heads (%lld kv), ffn %lld; "
        "%.2fM parameters outside the embeddings (teacher %.2fM)\n",
        a.student_preset.c_str(), (long long)c.dim, (long long)c.n_layers, (long long)c.n_heads,
        (long long)c.n_kv_heads, (long long)c.ffn_dim, double(train::body_param_count(c)) / 1e6,
        double(train::body_param_count(teacher.model->config())) / 1e6);
    if (train::body_param_count(c) >= train::body_param_count(teacher.model->config()))
      std::fprintf(stderr,
                   "distill: note: the student is not smaller than the teacher (a draft should "
                   "be); --dim, --layers, --heads, --kv-heads and --ffn change its shape\n");
  } else {
    student = train::load_trainable(a.student);
  }
  if (teacher.vocab.pieces != student.vocab.pieces)
    throw std::invalid_argument("distill: teacher and student have different tokenizers");
  const tokenizer::Tokenizer tok(student.vocab);
  ThreadPool pool(a.threads > 0 ? a.threads : default_thread_count());
  a.opt.teacher = teacher.model.get();
  a.opt.model_name = "shrike-distilled";
  if (a.samples.count > 0) return distill_on_samples(a, teacher, student, pool);
  auto train_set = data::read_examples(a.data);
  const auto dev_set = a.dev.empty() ? std::vector<data::Example>{} : data::read_examples(a.dev);

  if (!a.unlabeled.empty()) {
    // Utterances without labels: the teacher's own answers become their labels, and the KL
    // term teaches the student the teacher's whole distribution on them.
    auto extra = data::read_examples(a.unlabeled);
    const auto m = train::to_inference_model(*teacher.model);
    const auto answers =
        task::predict_task(*m, tok, extra, pool, task::prompt_format_of(carried_task(a)));
    int64_t used = 0;
    for (size_t i = 0; i < extra.size(); ++i) {
      if (!answers[i].parsed) continue;
      extra[i].intent = answers[i].intent;
      extra[i].slots = answers[i].slots;
      train_set.push_back(extra[i]);
      ++used;
    }
    std::fprintf(stderr, "distill: %lld of %zu unlabeled utterances labelled by the teacher\n",
                 (long long)used, extra.size());
  }

  // Swapped copies after the teacher labelled the unlabeled utterances: their values are its.
  train_set = with_swapped_values(train_set, a.swap, a.opt.seed, "distill");
  report_memory(*teacher.model, *student.model, a.opt);
  train::OptimizerState state;
  // The student reads the prompts the teacher's task defines.
  const task::PromptFormat format = task::prompt_format_of(carried_task(a));
  task::train_task(
      *student.model, tok, train_set, dev_set, a.opt, state, pool,
      [](const train::EpochReport& r) { report("distill", r); }, format);
  if (a.finetune_epochs > 0) {
    const train::TrainOptions ft = finetune_options(a);
    train::OptimizerState ft_state;
    task::train_task(
        *student.model, tok, train_set, dev_set, ft, ft_state, pool,
        [](const train::EpochReport& r) { report("fine-tune", r); }, format);
  }
  const std::string chat_template = chat_template_of(student, teacher);
  release_training_memory(teacher, student, state);
  train::save_model(*student.model, student.vocab, a.opt.model_name, a.out, nullptr,
                    task::task_metadata(carried_task(a)), chat_template);
  std::fprintf(stderr, "distill: wrote %s\n", a.out.c_str());
  return 0;
}

}  // namespace

Runner add_distill(CLI::App& app) {
  auto a = std::make_shared<DistillArgs>();
  a->opt.lr = 5e-4;
  app.add_option("--teacher", a->teacher, "teacher model: GGUF or Hugging Face folder")->required();
  auto* student =
      app.add_option("--student", a->student,
                     "student model: GGUF or Hugging Face folder (e.g. pruned from the teacher)");
  auto* preset = app.add_option("--student-preset", a->student_preset,
                                "or a fresh student of this shape with the teacher's tokenizer "
                                "(draft: a speculative-decoding draft)")
                     ->check(CLI::IsMember({"tiny", "small", "base", "draft"}));
  student->excludes(preset);
  auto* group = app.add_option_group("student");
  group->add_options(student, preset);
  group->require_option(1);
  auto* data = app.add_option("--data", a->data, "labelled examples (JSONL)");
  auto* samples = app.add_option("--teacher-samples", a->samples.count,
                                 "or train on this many sequences sampled from the teacher "
                                 "(from BOS; for a model without task data, e.g. a draft)")
                      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  auto* text = app.add_option_group("text");
  text->add_options(data, samples);
  text->require_option(1);
  app.add_option("--sample-len", a->samples.length,
                 "with --teacher-samples: tokens per sample at most (default 256)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))
      ->needs(samples);
  app.add_option("--sample-temp", a->samples.temperature,
                 "with --teacher-samples: sampling temperature (default 1)")
      ->check(CLI::Range(0.05, 10.0))
      ->needs(samples);
  app.add_option("--dim", a->shape.dim, "with --student-preset: override its width")
      ->check(CLI::Range(8, 1 << 16));
  app.add_option("--layers", a->shape.layers, "with --student-preset: its layer count")
      ->check(CLI::Range(1, 256));
  app.add_option("--heads", a->shape.heads, "with --student-preset: its head count")
      ->check(CLI::Range(1, 1024));
  app.add_option("--kv-heads", a->shape.kv_heads, "with --student-preset: its KV head count")
      ->check(CLI::Range(1, 1024));
  app.add_option("--ffn", a->shape.ffn, "with --student-preset: its FFN width")
      ->check(CLI::Range(8, 1 << 20));
  app.add_option("--dev", a->dev, "dev examples (JSONL): accuracy after each epoch");
  app.add_option("--unlabeled", a->unlabeled, "extra utterances (JSONL) labelled by the teacher");
  app.add_option("--alpha", a->opt.alpha, "weight of the KL term")->check(CLI::Range(0.0, 1.0));
  app.add_option("--temp", a->opt.temp, "softmax temperature of the KL term")
      ->check(CLI::Range(0.1, 20.0));
  app.add_option("--epochs", a->opt.epochs, "distillation epochs")->check(CLI::Range(1, 1000));
  add_value_swap_options(app, a->swap);
  add_regularisation_options(app, a->opt);
  app.add_option("--lr", a->opt.lr, "peak learning rate")->check(CLI::Range(1e-7, 1.0));
  app.add_option("--finetune-epochs", a->finetune_epochs, "label-only epochs afterwards")
      ->check(CLI::Range(0, 1000));
  app.add_option("--finetune-lr", a->finetune_lr, "their peak learning rate")
      ->check(CLI::Range(1e-7, 1.0));
  app.add_option("--batch-tokens", a->opt.batch_tokens, "tokens per batch")
      ->check(CLI::Range(16, 1 << 20));
  app.add_flag("--freeze-embeddings", a->opt.freeze_embeddings,
               "keep the student's token embedding (and untied output matrix) as they are: no "
               "gradients or optimizer state for them (most of a small model with a large "
               "vocabulary)");
  app.add_option("--dev-limit", a->opt.dev_limit, "dev examples decoded per epoch")
      ->check(CLI::NonNegativeNumber);
  app.add_option(
      "--seed", a->opt.seed,
      "shuffling (and a fresh student's initialisation, and the teacher's samples) seed");
  app.add_option("-t,--threads", a->threads, "threads (default: all cores)");
  app.add_flag("!--no-progress", a->opt.progress, "no progress line");
  app.add_option("-o,--output", a->out, "distilled model GGUF")->required();
  return [a] { return run_distill(*a); };
}

}  // namespace shrike::cli
