#include "optimize/builds.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "core/file_buffer.h"
#include "gguf/gguf.h"
#include "optimize/process.h"
#include "task/task_definition.h"

namespace shrike::optimize {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

void Run::say(const std::string& msg) const {
  if (!o.progress) return;
  char buf[32];
  std::snprintf(buf, sizeof buf, "[%7.1f s] ",
                std::chrono::duration<double>(Clock::now() - t0).count());
  o.progress(buf + msg);
}

std::vector<std::string> Run::cmd(std::initializer_list<std::string> args) const {
  return cmd(std::vector<std::string>(args));
}

std::vector<std::string> Run::cmd(const std::vector<std::string>& args) const {
  std::vector<std::string> v = {o.shrike_bin};
  v.insert(v.end(), args.begin(), args.end());
  return v;
}

void Run::add_threads(std::vector<std::string>& argv) const {
  if (o.threads > 0) argv.insert(argv.end(), {"-t", std::to_string(o.threads)});
}

void Run::build(const std::string& what, const std::string& artefact,
                const std::vector<std::string>& argv, const std::vector<std::string>& inputs,
                double timeout_s) {
  const std::vector<std::string> recipe(argv.begin() + 1, argv.end());
  const std::string key = artefact_key(recipe, inputs);
  if (cache.fresh(artefact, key)) {
    say(what + ": cached (" + artefact + ")");
    return;
  }
  say(what + ": " + shell_join(recipe));
  const auto t = Clock::now();
  cache.forget(artefact);
  run_checked(argv, logs + "/" + fs::path(artefact).filename().string() + ".log", timeout_s);
  if (!fs::exists(artefact))
    throw std::runtime_error(what + ": the command succeeded but wrote no " + artefact);
  cache.record(artefact, key);
  char buf[64];
  std::snprintf(buf, sizeof buf, " done in %.0f s",
                std::chrono::duration<double>(Clock::now() - t).count());
  say(what + buf);
}

const std::string& Models::path(StageModel m) const {
  switch (m) {
    case StageModel::Teacher:
      return teacher;
    case StageModel::TeacherInt8:
      return teacher_q8;
    case StageModel::StudentInt8:
      return student_q8;
    case StageModel::StudentInt8Trimmed:
      return trimmed;
  }
  return teacher;
}

const std::string& Models::draft_for(StageModel m) const {
  return m == StageModel::StudentInt8Trimmed ? draft_trimmed : draft_q8;
}

int64_t vocab_size_of(const std::string& model) {
  const gguf::GgufFile f = gguf::GgufFile::open(model);
  const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
  if (!tokens) throw FileError(model + ": no tokenizer.ggml.tokens (a model without a vocabulary)");
  return int64_t(tokens->array_size);
}

std::vector<std::string> draft_shape_args(const std::string& student) {
  const gguf::GgufFile f = gguf::GgufFile::open(student);
  const std::string arch = f.get_string_or("general.architecture", "llama");
  auto key = [&](const char* k) { return int64_t(f.get_uint_or(arch + "." + k, 0)); };
  const int64_t dim = key("embedding_length"), layers = key("block_count"),
                ffn = key("feed_forward_length");
  if (dim <= 0 || layers <= 0 || ffn <= 0)
    throw FileError(student + ": no " + arch + ".embedding_length, block_count or " +
                    "feed_forward_length (cannot size a draft for it)");
  const int64_t draft_dim = std::max<int64_t>(32, dim / 2 / 32 * 32);
  const int64_t heads = std::max<int64_t>(1, draft_dim / 64);
  return {"--dim",      std::to_string(draft_dim),
          "--layers",   std::to_string(std::max<int64_t>(1, layers / 4)),
          "--heads",    std::to_string(heads),
          "--kv-heads", "1",
          "--ffn",      std::to_string(std::max<int64_t>(64, ffn / 4 / 32 * 32))};
}

namespace {

// The regular files of a folder, sorted: what a Hugging Face teacher's cache key hashes.
std::vector<std::string> folder_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// The distillation options every distilled model of the run shares.
std::vector<std::string> distill_args(const OptimizeOptions& o, const std::string& d,
                                      const std::string& out) {
  return {"--data",
          d + "/train.jsonl",
          "--dev",
          d + "/dev.jsonl",
          "--alpha",
          "0.5",
          "--temp",
          "2",
          "--epochs",
          std::to_string(o.distill_epochs),
          "--dev-limit",
          "100",
          "--no-progress",
          "-o",
          out};
}

std::vector<std::string> joined(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

std::vector<BuildStep> model_builds(const OptimizeOptions& o, const std::string& d,
                                    const std::string& calib, Models& m) {
  const std::string& out = o.out_dir;
  const std::string train = d + "/train.jsonl", dev = d + "/dev.jsonl";
  m.teacher_q8 = out + "/teacher-q8_0.gguf";
  m.student = out + "/student.gguf";
  m.student_q8 = out + "/student-q8_0.gguf";
  m.draft = out + "/draft.gguf";
  m.draft_q8 = out + "/draft-q8_0.gguf";
  m.trimmed = out + "/student-trimmed.gguf";
  m.draft_trimmed = out + "/draft-trimmed.gguf";
  const std::string pruned = out + "/pruned.gguf";
  auto int8 = [&o, calib](const std::string& in, const std::string& dst) {
    return std::vector<std::string>{
        "quantize", in,     "-o",      dst,   "--type",        "q8_0",
        "--method", "gptq", "--calib", calib, "--calib-limit", std::to_string(o.calib_limit)};
  };
  auto trim = [train, dev](const std::string& in, const std::string& dst) {
    return std::vector<std::string>{"trim-vocab",  in,    "-o",          dst,
                                    "--keep-from", train, "--keep-from", dev};
  };

  std::vector<BuildStep> steps;
  if (o.teacher.empty()) {
    m.teacher = out + "/teacher.gguf";
    m.teacher_origin = "trained here: preset " + o.preset + ", " + std::to_string(o.epochs) +
                       " epochs on " + train;
    steps.push_back({"teacher",
                     m.teacher,
                     [&o, train, dev, &m] {
                       return std::vector<std::string>{
                           "train",       "--data",   train,
                           "--dev",       dev,        "--preset",
                           o.preset,      "--epochs", std::to_string(o.epochs),
                           "--dev-limit", "100",      "--no-progress",
                           "-o",          m.teacher};
                     },
                     {train, dev}});
  } else {
    m.teacher_origin = "given: " + o.teacher;
    // A teacher trained elsewhere may come as a Hugging Face folder and without shrike's task
    // keys: one `shrike task set` makes it a GGUF that carries the data's labels and slot names
    // (serve's /v1/intent and constrained answers, eval's task schema need them).
    const bool folder = fs::is_directory(o.teacher);
    m.teacher = o.teacher;
    // --prompt re-attaches the task with that prompt even to a teacher that carries one.
    if (folder || !o.prompt.empty() || !task::task_of_model(o.teacher)) {
      m.teacher = out + "/teacher.gguf";
      std::vector<std::string> inputs =
          folder ? folder_files(o.teacher) : std::vector<std::string>{o.teacher};
      for (const char* split : {"train", "dev", "test"})
        inputs.push_back(d + "/" + split + ".jsonl");
      m.teacher_origin += folder ? " (Hugging Face folder; converted, task attached)"
                                 : " (task attached from the data)";
      steps.push_back({"teacher (the data's task attached" +
                           std::string(folder ? ", converted from the Hugging Face folder)" : ")"),
                       m.teacher,
                       [&o, d, &m] {
                         std::vector<std::string> args = {"task", "set", o.teacher, "--data",
                                                          d,      "-o",  m.teacher};
                         if (!o.prompt.empty()) args.insert(args.end(), {"--prompt", o.prompt});
                         return args;
                       },
                       inputs, false});
    }
  }
  steps.push_back({"teacher INT8",
                   m.teacher_q8,
                   [&m, int8] { return int8(m.teacher, m.teacher_q8); },
                   {m.teacher, calib}});
  steps.push_back({"pruned",
                   pruned,
                   [&o, &m, dev, pruned] {
                     std::vector<std::string> args = {"prune",   m.teacher,
                                                      "--heads", std::to_string(o.prune_heads),
                                                      "--ffn",   std::to_string(o.prune_ffn),
                                                      "--calib", dev,
                                                      "-o",      pruned};
                     // Depth and width only when asked: the recipe (and so the cache key)
                     // of a run without them stays what it was.
                     if (o.prune_layers > 0)
                       args.insert(args.end(), {"--layers", std::to_string(o.prune_layers)});
                     if (o.prune_hidden > 0)
                       args.insert(args.end(), {"--hidden", std::to_string(o.prune_hidden)});
                     return args;
                   },
                   {m.teacher, dev}});
  steps.push_back({"student (distilled)",
                   m.student,
                   [&o, &m, d, pruned] {
                     return joined({"distill", "--teacher", m.teacher, "--student", pruned},
                                   distill_args(o, d, m.student));
                   },
                   {m.teacher, pruned, train, dev}});
  steps.push_back({"student INT8",
                   m.student_q8,
                   [&m, int8] { return int8(m.student, m.student_q8); },
                   {m.student, calib}});
  // The draft for speculative decoding: distilled from the student it drafts for (its acceptance
  // is agreement with that model, not with the teacher), then INT8 like the student.
  steps.push_back(
      {"draft (distilled from the student)",
       m.draft,
       [&o, &m, d] {
         const std::vector<std::string> shape = draft_shape_args(m.student);
         m.draft_shape.clear();
         for (size_t i = 0; i + 1 < shape.size(); i += 2)
           m.draft_shape += (i ? " " : "") + shape[i].substr(2) + " " + shape[i + 1];
         return joined(
             joined({"distill", "--teacher", m.student, "--student-preset", "draft"}, shape),
             distill_args(o, d, m.draft));
       },
       {m.student, train, dev}});
  steps.push_back({"draft INT8",
                   m.draft_q8,
                   [&m] {
                     return std::vector<std::string>{"quantize", m.draft,  "-o",
                                                     m.draft_q8, "--type", "q8_0"};
                   },
                   {m.draft},
                   false});
  // The student with only the tokens the task's prompts and answers use (training and dev texts
  // as the task formats them; byte fallbacks keep any other text encodable).
  steps.push_back({"student, vocabulary trimmed",
                   m.trimmed,
                   [&m, trim] { return trim(m.student_q8, m.trimmed); },
                   {m.student_q8, train, dev},
                   false,
                   {},
                   [&m] {
                     m.vocab_full = vocab_size_of(m.student_q8);
                     m.vocab_trimmed = vocab_size_of(m.trimmed);
                     m.use_trimmed = trim_worthwhile(m.vocab_full, m.vocab_trimmed);
                   }});
  // The draft for the trimmed student must have the same tokens: the same trim of the draft.
  steps.push_back({"draft, vocabulary trimmed",
                   m.draft_trimmed,
                   [&m, trim] { return trim(m.draft_q8, m.draft_trimmed); },
                   {m.draft_q8, train, dev},
                   false,
                   [&m] { return m.use_trimmed; },
                   [&m] {
                     if (vocab_size_of(m.draft_trimmed) != m.vocab_trimmed)
                       throw std::runtime_error("the trimmed draft has " +
                                                std::to_string(vocab_size_of(m.draft_trimmed)) +
                                                " tokens, the trimmed student " +
                                                std::to_string(m.vocab_trimmed));
                   }});
  return steps;
}

void run_builds(Run& run, const std::vector<BuildStep>& steps) {
  for (const BuildStep& s : steps) {
    if (s.needed && !s.needed()) continue;
    std::vector<std::string> argv = run.cmd(s.args());
    if (s.threads) run.add_threads(argv);
    run.build(s.what, s.output, argv, s.inputs, kBuildTimeout);
    if (s.then) s.then();
  }
}

}  // namespace shrike::optimize
