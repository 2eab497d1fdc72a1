// `shrike trim-vocab` as a user runs it: a smaller model that tokenizes the kept texts as before,
// --extra pieces kept, and clear errors (exit 2) for missing files, a DATA line without text, a
// model without a vocabulary and an unknown --extra piece.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gguf/gguf.h"
#include "run_shrike.h"

namespace shrike {
namespace {

using testing::CommandResult;
using testing::run_shrike;

class TrimVocabCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = (std::filesystem::temp_directory_path() /
            ("shrike_trim_vocab_cli_" + std::to_string(getpid())))
               .string();
    std::filesystem::create_directories(dir_);
    // synth's own SentencePiece-style vocabulary (control, byte and word pieces): no ../shared.
    ok("synth --dim 64 --layers 1 --heads 2 --ffn 128 --vocab 2000 --context 128 --type q8_0 "
       "-o " +
       path("in.gguf"));
    write(path("task.jsonl"),
          "{\"text\": \"where is my order SO123\", \"intent\": \"order_status\", \"slots\": "
          "{\"order_id\": \"SO123\"}}\n{\"text\": \"cancel it please\", \"intent\": \"cancel\"}\n");
    write(path("docs.jsonl"), "{\"text\": \"hello there\"}\n");
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string path(const std::string& name) { return dir_ + "/" + name; }
  static void write(const std::string& p, const std::string& s) { std::ofstream(p) << s; }
  static CommandResult ok(const std::string& args) {
    CommandResult r = run_shrike(args);
    EXPECT_EQ(r.exit_code, 0) << "shrike " << args << "\n" << r.err;
    return r;
  }
  static void fails(const std::string& args, const std::string& message) {
    const CommandResult r = run_shrike(args);
    EXPECT_EQ(r.exit_code, 2) << "shrike " << args << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << "shrike " << args << "\n" << r.err;
  }
  static inline std::string dir_;
};

TEST_F(TrimVocabCli, WritesASmallerModelThatTokenizesTheKeptTextsAsBefore) {
  const std::vector<std::string> pieces =
      gguf::GgufFile::open(path("in.gguf")).get_string_array("tokenizer.ggml.tokens");
  const std::string extra_piece = pieces[pieces.size() - 1];
  write(path("extra.txt"), extra_piece + "\n\n");
  const CommandResult r = ok("trim-vocab " + path("in.gguf") + " -o " + path("out.gguf") +
                             " --keep-from " + path("task.jsonl") + " --keep-from " +
                             path("docs.jsonl") + " --extra " + path("extra.txt"));
  EXPECT_NE(r.err.find("5 texts tokenize as before"), std::string::npos) << r.err;
  const gguf::GgufFile out = gguf::GgufFile::open(path("out.gguf"));
  const std::vector<std::string> kept = out.get_string_array("tokenizer.ggml.tokens");
  EXPECT_LT(kept.size(), pieces.size());
  EXPECT_EQ(kept.back(), extra_piece);
  EXPECT_EQ(out.get_uint("llama.vocab_size"), kept.size());
  EXPECT_EQ(out.tensor("token_embd.weight").dims[1], int64_t(kept.size()));
  // The model runs, and text the data never held still goes in and out unchanged.
  ok("generate -m " + path("out.gguf") + " -p 'Zebra 日本 🙂' -n 4");
  write(path("unseen.txt"), "Zebra 日本 🙂");
  write(path("ids.txt"),
        ok("tokenize -m " + path("out.gguf") + " --text-file " + path("unseen.txt")).out);
  EXPECT_EQ(
      ok("tokenize -m " + path("out.gguf") + " --detokenize --text-file " + path("ids.txt")).out,
      "Zebra 日本 🙂");
}

// A model that carries its task keeps the pieces of its labels' and slot names' answers even when
// DATA never names them (serving constrains answers to them), and keeps the task keys.
TEST_F(TrimVocabCli, KeepsTheCarriedTasksLabelsAndKeys) {
  {
    const gguf::GgufFile f = gguf::GgufFile::open(path("in.gguf"));
    gguf::GgufWriter w;
    for (const std::string& key : f.keys()) w.set_value(key, *f.find(key));
    w.set_string("shrike.task.format", "intent_slots_v1");
    w.set_string("shrike.task.instruction", "intent+slots: ");
    w.set_string_array("shrike.task.intents", {"refund_request", "zebra_question"});
    w.set_string_array("shrike.task.slots", {"order_id", "quokka_name"});
    for (const gguf::TensorInfo& t : f.tensors())
      w.add_tensor(t.name, t.type, t.dims, t.data, size_t(t.bytes));
    w.write(path("task_model.gguf"));
  }
  ok("trim-vocab " + path("in.gguf") + " -o " + path("plain_t.gguf") + " --keep-from " +
     path("docs.jsonl"));
  ok("trim-vocab " + path("task_model.gguf") + " -o " + path("task_t.gguf") + " --keep-from " +
     path("docs.jsonl"));
  const gguf::GgufFile plain = gguf::GgufFile::open(path("plain_t.gguf"));
  const gguf::GgufFile task = gguf::GgufFile::open(path("task_t.gguf"));
  EXPECT_GT(task.find("tokenizer.ggml.tokens")->array_size,
            plain.find("tokenizer.ggml.tokens")->array_size);
  EXPECT_EQ(task.get_string_array("shrike.task.intents"),
            (std::vector<std::string>{"refund_request", "zebra_question"}));
  EXPECT_EQ(task.get_string("shrike.task.instruction"), "intent+slots: ");
}

// A Qwen2-shaped model with a byte-level BPE vocabulary (synth's, with ranked merges): the
// merges list is cut with the pieces, the kept texts tokenize as before (trim-vocab checks it on
// the file it wrote), and unseen text still goes in and out through the single-byte pieces.
TEST_F(TrimVocabCli, ByteLevelBpeKeepsTheMergesOfTheKeptPieces) {
  ok("synth --arch qwen2 --dim 64 --layers 1 --heads 2 --kv-heads 1 --ffn 128 --vocab 5000 "
     "--vocab-type qwen2 --tied --context 128 --type f32 -o " +
     path("bpe.gguf"));
  const CommandResult r =
      ok("trim-vocab " + path("bpe.gguf") + " -o " + path("bpe_t.gguf") + " --keep-from " +
         path("task.jsonl") + " --keep-from " + path("docs.jsonl"));
  EXPECT_NE(r.err.find("5 texts tokenize as before"), std::string::npos) << r.err;
  const gguf::GgufFile in = gguf::GgufFile::open(path("bpe.gguf"));
  const gguf::GgufFile out = gguf::GgufFile::open(path("bpe_t.gguf"));
  const auto tokens = out.get_string_array("tokenizer.ggml.tokens");
  const auto merges = out.get_string_array("tokenizer.ggml.merges");
  EXPECT_LT(tokens.size() * 4, in.get_string_array("tokenizer.ggml.tokens").size());
  EXPECT_GT(merges.size(), 0u);
  EXPECT_LT(merges.size() * 4, in.get_string_array("tokenizer.ggml.merges").size());
  EXPECT_EQ(out.get_uint("qwen2.vocab_size"), tokens.size());
  write(path("bpe_unseen.txt"), "Zebra 日本 🙂 where is SO999?");
  write(path("bpe_ids.txt"),
        ok("tokenize -m " + path("bpe_t.gguf") + " --text-file " + path("bpe_unseen.txt")).out);
  EXPECT_EQ(
      ok("tokenize -m " + path("bpe_t.gguf") + " --detokenize --text-file " + path("bpe_ids.txt"))
          .out,
      "Zebra 日本 🙂 where is SO999?");
  ok("generate -m " + path("bpe_t.gguf") + " -p 'where is my order' -n 4");
}

TEST_F(TrimVocabCli, ErrorsNameTheFileAndWhatIsWrong) {
  fails("trim-vocab " + path("missing.gguf") + " -o " + path("o.gguf") + " --keep-from " +
            path("task.jsonl"),
        path("missing.gguf"));
  fails("trim-vocab " + path("in.gguf") + " -o " + path("o.gguf") + " --keep-from " +
            path("missing.jsonl"),
        path("missing.jsonl") + ": cannot open");
  write(path("notext.jsonl"), "{\"text\": \"fine\"}\n{\"body\": \"no text here\"}\n");
  fails("trim-vocab " + path("in.gguf") + " -o " + path("o.gguf") + " --keep-from " +
            path("notext.jsonl"),
        path("notext.jsonl") + ":2: no \"text\" string");
  write(path("task_notext.jsonl"), "{\"text\": \"a\", \"intent\": \"x\"}\n{\"intent\": \"y\"}\n");
  fails("trim-vocab " + path("in.gguf") + " -o " + path("o.gguf") + " --keep-from " +
            path("task_notext.jsonl"),
        path("task_notext.jsonl") + ":2:");
  write(path("bad_extra.txt"), "zzqq-not-a-piece\n");
  fails("trim-vocab " + path("in.gguf") + " -o " + path("o.gguf") + " --keep-from " +
            path("task.jsonl") + " --extra " + path("bad_extra.txt"),
        path("bad_extra.txt") + ":1: 'zzqq-not-a-piece' is not a piece of the vocabulary");
  {
    gguf::GgufWriter w;
    w.set_string("general.architecture", "llama");
    const std::vector<float> rows(8 * 4, 0.5f);
    w.add_tensor("token_embd.weight", DType::F32, {8, 4}, rows.data(), rows.size() * 4);
    w.write(path("novocab.gguf"));
  }
  fails("trim-vocab " + path("novocab.gguf") + " -o " + path("o.gguf") + " --keep-from " +
            path("task.jsonl"),
        path("novocab.gguf") + ": no vocabulary (tokenizer.ggml.tokens)");
  EXPECT_FALSE(std::filesystem::exists(path("o.gguf")));
}

}  // namespace
}  // namespace shrike
