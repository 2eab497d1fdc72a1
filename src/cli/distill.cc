// `shrike distill --teacher T (--student S | --student-preset P) --data F -o OUT`: trains the
// student (pruned from the teacher, or fresh at a preset's shape with the teacher's tokenizer,
// e.g. a speculative-decoding draft) on
// alpha * KL(teacher || student at temperature) + (1 - alpha) * cross-entropy on the labels,
// optionally on teacher-labelled extra utterances, then optionally fine-tunes on the labels.
#include <cstdio>

#include "cli/commands.h"
#include "core/thread_pool.h"
#include "data/example.h"
#include "data/task_scores.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/presets.h"
#include "train/task_eval.h"
#include "train/trainer.h"

namespace shrike::cli {
namespace {

struct DistillArgs {
  std::string teacher, student, student_preset, data, dev, unlabeled, out;
  train::TrainOptions opt;
  int64_t finetune_epochs = 0;
  double finetune_lr = 2e-4;
  int threads = 0;
};

void report(const char* stage, const train::EpochReport& r) {
  std::fprintf(stderr, "%s %s\n", stage, train::describe(r).c_str());
}

int run_distill(DistillArgs a) {
  train::TrainableFile teacher = train::load_trainable(a.teacher);
  train::TrainableFile student;
  if (!a.student_preset.empty()) {
    const model::ModelConfig c = train::student_config(a.student_preset, teacher.model->config());
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
  } else {
    student = train::load_trainable(a.student);
  }
  if (teacher.vocab.pieces != student.vocab.pieces)
    throw std::invalid_argument("distill: teacher and student have different tokenizers");
  const tokenizer::Tokenizer tok(student.vocab);
  ThreadPool pool(a.threads > 0 ? a.threads : default_thread_count());
  auto train_set = data::read_examples(a.data);
  const auto dev_set = a.dev.empty() ? std::vector<data::Example>{} : data::read_examples(a.dev);

  if (!a.unlabeled.empty()) {
    // Utterances without labels: the teacher's own answers become their labels, and the KL
    // term teaches the student the teacher's whole distribution on them.
    auto extra = data::read_examples(a.unlabeled);
    const auto m = train::to_inference_model(*teacher.model);
    const auto answers = train::predict_task(*m, tok, extra, pool);
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

  a.opt.teacher = teacher.model.get();
  a.opt.model_name = "shrike-distilled";
  train::OptimizerState state;
  train::train_task(*student.model, tok, train_set, dev_set, a.opt, state, pool,
                    [](const train::EpochReport& r) { report("distill", r); });
  if (a.finetune_epochs > 0) {
    train::TrainOptions ft = a.opt;
    ft.teacher = nullptr;
    ft.epochs = a.finetune_epochs;
    ft.lr = a.finetune_lr;
    ft.seed = a.opt.seed + 1;
    train::OptimizerState ft_state;
    train::train_task(*student.model, tok, train_set, dev_set, ft, ft_state, pool,
                      [](const train::EpochReport& r) { report("fine-tune", r); });
  }
  // The student answers the teacher's task (its own file's, when it had one, is the same task).
  const auto& task = student.task ? student.task : teacher.task;
  train::save_model(*student.model, student.vocab, a.opt.model_name, a.out, nullptr,
                    task ? &*task : nullptr);
  std::fprintf(stderr, "distill: wrote %s\n", a.out.c_str());
  return 0;
}

}  // namespace

Runner add_distill(CLI::App& app) {
  auto a = std::make_shared<DistillArgs>();
  a->opt.lr = 5e-4;
  app.add_option("--teacher", a->teacher, "teacher model GGUF")->required();
  auto* student =
      app.add_option("--student", a->student, "student model GGUF (e.g. pruned from the teacher)");
  auto* preset = app.add_option("--student-preset", a->student_preset,
                                "or a fresh student of this shape with the teacher's tokenizer "
                                "(draft: a speculative-decoding draft)")
                     ->check(CLI::IsMember({"tiny", "small", "base", "draft"}));
  student->excludes(preset);
  auto* group = app.add_option_group("student");
  group->add_options(student, preset);
  group->require_option(1);
  app.add_option("--data", a->data, "labelled examples (JSONL)")->required();
  app.add_option("--dev", a->dev, "dev examples (JSONL): accuracy after each epoch");
  app.add_option("--unlabeled", a->unlabeled, "extra utterances (JSONL) labelled by the teacher");
  app.add_option("--alpha", a->opt.alpha, "weight of the KL term")->check(CLI::Range(0.0, 1.0));
  app.add_option("--temp", a->opt.temp, "softmax temperature of the KL term")
      ->check(CLI::Range(0.1, 20.0));
  app.add_option("--epochs", a->opt.epochs, "distillation epochs")->check(CLI::Range(1, 1000));
  app.add_option("--lr", a->opt.lr, "peak learning rate")->check(CLI::Range(1e-7, 1.0));
  app.add_option("--finetune-epochs", a->finetune_epochs, "label-only epochs afterwards")
      ->check(CLI::Range(0, 1000));
  app.add_option("--finetune-lr", a->finetune_lr, "their peak learning rate")
      ->check(CLI::Range(1e-7, 1.0));
  app.add_option("--batch-tokens", a->opt.batch_tokens, "tokens per batch")
      ->check(CLI::Range(16, 1 << 20));
  app.add_option("--dev-limit", a->opt.dev_limit, "dev examples decoded per epoch")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", a->opt.seed, "shuffling (and a fresh student's initialisation) seed");
  app.add_option("-t,--threads", a->threads, "threads (default: all cores)");
  app.add_flag("!--no-progress", a->opt.progress, "no progress line");
  app.add_option("-o,--output", a->out, "distilled model GGUF")->required();
  return [a] { return run_distill(*a); };
}

}  // namespace shrike::cli
