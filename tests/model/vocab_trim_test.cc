// Vocabulary trimming on the 32k llama-spm vocabulary: kept texts tokenize to the same pieces, the
// merge closure is what makes that true, other text still round-trips, and a trimmed model's
// logits are the full model's at the kept ids, in every weight type.
#include "model/vocab_trim.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/dtype.h"
#include "core/file_buffer.h"
#include "core/thread_pool.h"
#include "data/generator.h"
#include "gguf/gguf.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "model/synth.h"
#include "shared_data.h"
#include "task/task_format.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_trim.h"

namespace shrike {
namespace {

const char* const kSpm = "reference/tokenizers/ggml-vocab-llama-spm.gguf";

std::string spm_path() {
  return testing::shared_dir() + "/" + kSpm;
}

tokenizer::Tokenizer spm_tokenizer() {
  return tokenizer::Tokenizer(tokenizer::vocab_from_gguf(gguf::GgufFile::open(spm_path())));
}

// The task's texts as training encodes them: each example's prompt and its answer.
std::vector<std::string> task_texts(const std::vector<data::Example>& examples) {
  std::vector<std::string> texts;
  for (const data::Example& ex : examples) {
    texts.push_back(task::task_prompt(ex.text));
    texts.push_back(task::task_answer(ex));
  }
  return texts;
}

data::GeneratedData small_dataset() {
  data::GeneratorOptions o;
  o.n_train = 400;
  return data::generate_dataset(o);
}

std::vector<std::string> pieces(const tokenizer::Tokenizer& tok, const std::string& text) {
  std::vector<std::string> p;
  for (int32_t id : tok.encode(text, /*add_bos=*/true)) p.push_back(tok.vocab().pieces[size_t(id)]);
  return p;
}

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("shrike_vocab_trim_" + std::to_string(getpid()) + "_" + name);
}

TEST(VocabTrim, KeptTextsTokenizeToTheSamePiecesAndOtherTextRoundTrips) {
  SHRIKE_REQUIRE_SHARED(kSpm);
  const tokenizer::Tokenizer full = spm_tokenizer();
  const auto data = small_dataset();
  const std::vector<std::string> texts = task_texts(data.train);
  const std::vector<int32_t> kept = tokenizer::tokens_to_keep(full, texts);
  const tokenizer::Tokenizer trimmed(tokenizer::subset_vocab(full.vocab(), kept));
  EXPECT_LT(trimmed.n_vocab() * 10, full.n_vocab());
  EXPECT_EQ(trimmed.vocab().pieces[size_t(trimmed.bos())], "<s>");
  EXPECT_EQ(trimmed.vocab().pieces[size_t(trimmed.eos())], "</s>");
  for (const std::string& text : texts) {
    ASSERT_EQ(pieces(trimmed, text), pieces(full, text)) << text;
    EXPECT_EQ(trimmed.decode(trimmed.encode(text, true)), text);
  }
  // Text the trimming never saw (the held-out test split, other scripts, emoji): other pieces,
  // the same text back through the byte fallback.
  std::vector<std::string> unseen = task_texts(data.test);
  unseen.push_back("Zebras quantise Überraschungen; 日本語のテキスト 🙂 \t\n<0x41> <s>");
  for (const std::string& text : unseen)
    EXPECT_EQ(trimmed.decode(trimmed.encode(text, true)), text);
}

// The other vocabulary kinds, on real vocabularies: GPT-2's byte-level BPE (50,257 tokens, 50,000
// ranked merges, cut with the pieces) and BERT's WordPiece (bge, lower-cased: pieces only).
struct KindCase {
  const char* file;
  tokenizer::VocabKind kind;
  bool round_trips;  // decode(encode(text)) == text for any text
};

class VocabTrimKinds : public ::testing::TestWithParam<KindCase> {};

TEST_P(VocabTrimKinds, KeptTextsTokenizeToTheSamePiecesAndOtherTextStillEncodes) {
  const KindCase c = GetParam();
  SHRIKE_REQUIRE_SHARED(c.file);
  const tokenizer::Tokenizer full(
      tokenizer::vocab_from_gguf(gguf::GgufFile::open(testing::shared_dir() + "/" + c.file)));
  ASSERT_EQ(full.vocab().kind, c.kind);
  const auto data = small_dataset();
  const std::vector<std::string> texts = task_texts(data.train);
  const std::vector<int32_t> kept = tokenizer::tokens_to_keep(full, texts);
  const tokenizer::Vocab small = tokenizer::subset_vocab(full.vocab(), kept);
  const tokenizer::Tokenizer trimmed(small);
  std::printf("%s: %d -> %d tokens, %zu -> %zu merges\n", c.file, full.n_vocab(), trimmed.n_vocab(),
              full.vocab().merges.size(), small.merges.size());
  EXPECT_LT(trimmed.n_vocab() * 10, full.n_vocab());
  if (c.kind == tokenizer::VocabKind::Bpe) {
    EXPECT_LT(small.merges.size() * 10, full.vocab().merges.size());
    EXPECT_GT(small.merges.size(), 0u);
  }
  for (const std::string& text : texts) {
    ASSERT_EQ(pieces(trimmed, text), pieces(full, text)) << text;
    if (c.round_trips) {
      EXPECT_EQ(trimmed.decode(trimmed.encode(text, false)), text);
    }
  }
  std::vector<std::string> unseen = task_texts(data.test);
  unseen.push_back("Zebras quantise Überraschungen; 日本語のテキスト 🙂 \t\n");
  for (const std::string& text : unseen) {
    const std::vector<int32_t> ids = trimmed.encode(text, false);
    if (c.round_trips)
      EXPECT_EQ(trimmed.decode(ids), text);
    else
      EXPECT_FALSE(ids.empty()) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, VocabTrimKinds,
                         ::testing::Values(KindCase{"reference/tokenizers/ggml-vocab-gpt-2.gguf",
                                                    tokenizer::VocabKind::Bpe, true},
                                           KindCase{"reference/tokenizers/ggml-vocab-bert-bge.gguf",
                                                    tokenizer::VocabKind::Wpm, false}),
                         [](const ::testing::TestParamInfo<KindCase>& i) {
                           return i.param.kind == tokenizer::VocabKind::Bpe
                                      ? std::string("ByteLevelBpe")
                                      : std::string("WordPiece");
                         });

// Byte-level BPE needs the closure too: with only the texts' own tokens (and the single bytes)
// the merges that built them lose an intermediate product and some texts change.
TEST(VocabTrim, ByteLevelBpeWithoutTheMergeClosureKeptTextsChange) {
  const char* const kGpt2 = "reference/tokenizers/ggml-vocab-gpt-2.gguf";
  SHRIKE_REQUIRE_SHARED(kGpt2);
  const tokenizer::Tokenizer full(
      tokenizer::vocab_from_gguf(gguf::GgufFile::open(testing::shared_dir() + "/" + kGpt2)));
  const std::vector<std::string> texts = task_texts(small_dataset().train);
  const std::vector<int32_t> with_closure = tokenizer::tokens_to_keep(full, texts);
  std::vector<bool> keep(size_t(full.n_vocab()));
  for (const std::string& text : texts)
    for (int32_t id : full.encode(text, false)) keep[size_t(id)] = true;
  for (int32_t id : with_closure)  // the single bytes and specials, not the merge products
    if (tokenizer::BpeModel::piece_bytes(full.vocab().pieces[size_t(id)]).size() == 1 ||
        full.vocab().types[size_t(id)] != tokenizer::TokenType::Normal)
      keep[size_t(id)] = true;
  std::vector<int32_t> no_closure;
  for (int32_t id = 0; id < full.n_vocab(); ++id)
    if (keep[size_t(id)]) no_closure.push_back(id);
  EXPECT_GT(with_closure.size(), no_closure.size());
  const tokenizer::Tokenizer trimmed(tokenizer::subset_vocab(full.vocab(), no_closure));
  int64_t changed = 0;
  for (const std::string& text : texts) changed += pieces(trimmed, text) != pieces(full, text);
  EXPECT_GT(changed, 0);
}

// Without the intermediate merge products some kept texts change: the closure is necessary,
// and the test above would catch its absence.
TEST(VocabTrim, WithoutTheMergeClosureKeptTextsChange) {
  SHRIKE_REQUIRE_SHARED(kSpm);
  const tokenizer::Tokenizer full = spm_tokenizer();
  const std::vector<std::string> texts = task_texts(small_dataset().train);
  const tokenizer::Vocab& v = full.vocab();
  std::vector<bool> keep(size_t(v.size()));
  for (size_t id = 0; id < keep.size(); ++id)
    keep[id] = v.types[id] != tokenizer::TokenType::Normal;
  for (const std::string& text : texts)
    for (int32_t id : full.encode(text, false)) keep[size_t(id)] = true;
  std::vector<int32_t> no_closure;
  for (int32_t id = 0; id < v.size(); ++id)
    if (keep[size_t(id)]) no_closure.push_back(id);
  const std::vector<int32_t> with_closure = tokenizer::tokens_to_keep(full, texts);
  EXPECT_GT(with_closure.size(), no_closure.size());

  const tokenizer::Tokenizer trimmed(tokenizer::subset_vocab(v, no_closure));
  int64_t changed = 0;
  for (const std::string& text : texts) changed += pieces(trimmed, text) != pieces(full, text);
  EXPECT_GT(changed, 0);
}

TEST(VocabTrim, MergeProductsEndWithThePieceAndStayInsideIt) {
  SHRIKE_REQUIRE_SHARED(kSpm);
  const tokenizer::Tokenizer full = spm_tokenizer();
  const tokenizer::Vocab& v = full.vocab();
  for (const std::string word :
       {"\xE2\x96\x81order", "\xE2\x96\x81payment", "\xE2\x96\x81intent"}) {
    const auto it = std::find(v.pieces.begin(), v.pieces.end(), word);
    ASSERT_NE(it, v.pieces.end()) << word;
    const auto id = int32_t(it - v.pieces.begin());
    const std::vector<int32_t> products = tokenizer::spm_merge_products(v, id);
    ASSERT_FALSE(products.empty());
    EXPECT_EQ(products.back(), id);
    for (int32_t p : products) EXPECT_NE(word.find(v.pieces[size_t(p)]), std::string::npos);
    // Encoding the word alone (the merges a text performs) gives the piece itself.
    EXPECT_EQ(full.encode(word.substr(3), false), std::vector<int32_t>{id});
  }
  EXPECT_TRUE(tokenizer::spm_merge_products(v, v.bos_id).empty());  // control: never merged
}

// A copy of an F32 synth model whose token_embd and output are quantised to `type` (with the
// ".scale" tensors of row-scale types), for the types synth does not write.
void retype(const std::string& in, const std::string& out, DType type) {
  const gguf::GgufFile f = gguf::GgufFile::open(in);
  gguf::GgufWriter w;
  for (const std::string& key : f.keys()) w.set_value(key, *f.find(key));
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.name != "token_embd.weight" && t.name != "output.weight") {
      w.add_tensor(t.name, t.type, t.dims, t.data, size_t(t.bytes));
      continue;
    }
    ASSERT_EQ(t.type, DType::F32);
    const int64_t cols = t.dims[0], rows = t.dims[1];
    const auto row = size_t(dtype_row_bytes(type, cols));
    std::vector<uint8_t> q(row * size_t(rows));
    std::vector<float> scales(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(type, reinterpret_cast<const float*>(t.data) + r * cols, q.data() + r * row,
                   cols, &scales[size_t(r)]);
    w.add_tensor(t.name, type, t.dims, q.data(), q.size());
    if (dtype_has_row_scale(type))
      w.add_tensor(t.name + ".scale", DType::F32, {rows}, scales.data(), scales.size() * 4);
  }
  w.write(out);
}

struct TypeCase {
  DType type;
  bool tied;
};

class VocabTrimModel : public ::testing::TestWithParam<TypeCase> {};

TEST_P(VocabTrimModel, LogitsAtKeptIdsAndRowsAreTheFullModels) {
  SHRIKE_REQUIRE_SHARED(kSpm);
  const auto [type, tied] = GetParam();
  const bool synth_writes =
      type == DType::F32 || type == DType::F16 || type == DType::Q8_0 || type == DType::Q4_0;
  const auto full_path = temp_file("full.gguf"), synth_path = temp_file("synth.gguf");
  const auto trim_path = temp_file("trim.gguf");
  model::SynthOptions o;
  o.dim = 128, o.n_layers = 1, o.n_heads = 2, o.n_kv_heads = 2, o.ffn_dim = 128;
  o.context_length = 256, o.type = synth_writes ? type : DType::F32, o.tied_output = tied;
  o.vocab_from = spm_path();
  model::write_synth_model(o, synth_writes ? full_path.string() : synth_path.string());
  if (!synth_writes) retype(synth_path.string(), full_path.string(), type);

  const tokenizer::Tokenizer tok = spm_tokenizer();
  const std::vector<data::Example> examples = small_dataset().train;
  const std::vector<int32_t> kept = tokenizer::tokens_to_keep(tok, task_texts(examples));
  const model::VocabTrimStats st =
      model::trim_model_vocab(gguf::GgufFile::open(full_path.string()), kept, trim_path.string());
  EXPECT_EQ(st.vocab_after, int64_t(kept.size()));

  // Rows: byte for byte the full model's rows at the kept ids (and the row scales).
  const gguf::GgufFile ff = gguf::GgufFile::open(full_path.string());
  const gguf::GgufFile tf = gguf::GgufFile::open(trim_path.string());
  EXPECT_EQ(tf.get_uint("llama.vocab_size"), kept.size());
  EXPECT_EQ(tf.get_int_array(model::kTrimSourceIdsKey),
            std::vector<int64_t>(kept.begin(), kept.end()));
  int64_t per_token = 0;
  for (const gguf::TensorInfo& t : ff.tensors()) {
    const gguf::TensorInfo& u = tf.tensor(t.name);
    EXPECT_EQ(u.type, t.type) << t.name;
    if (t.dims.back() != tok.n_vocab()) {
      ASSERT_EQ(u.bytes, t.bytes) << t.name;
      EXPECT_EQ(std::memcmp(u.data, t.data, t.bytes), 0) << t.name;
      continue;
    }
    ++per_token;
    const size_t row = t.bytes / size_t(tok.n_vocab());
    ASSERT_EQ(u.bytes, row * kept.size()) << t.name;
    for (size_t i = 0; i < kept.size(); ++i)
      ASSERT_EQ(std::memcmp(u.data + i * row, t.data + size_t(kept[i]) * row, row), 0) << t.name;
  }
  EXPECT_EQ(per_token, (tied ? 1 : 2) * (dtype_has_row_scale(type) ? 2 : 1));

  // Logits over a kept text (prompt + answer): the trimmed model's are the full model's at the
  // kept ids, bit for bit.
  const auto full = model::load_model(full_path.string());
  const auto trimmed = model::load_model(trim_path.string());
  std::vector<int32_t> new_id(size_t(tok.n_vocab()), -1);
  for (size_t i = 0; i < kept.size(); ++i) new_id[size_t(kept[i])] = int32_t(i);
  ThreadPool pool(2);
  for (size_t e = 0; e < 3; ++e) {
    std::vector<int32_t> ids = tok.encode(task::task_prompt(examples[e].text), true);
    for (int32_t id : tok.encode(task::task_answer(examples[e]), false)) ids.push_back(id);
    std::vector<int32_t> trimmed_ids;
    for (int32_t id : ids) trimmed_ids.push_back(new_id[size_t(id)]);
    const auto n = int64_t(ids.size());
    const model::ModelConfig& c = full->config();
    kv::ContiguousKvCache kv_full(c.n_layers, n, c.n_kv_heads, c.head_dim);
    kv::ContiguousKvCache kv_trim(c.n_layers, n, c.n_kv_heads, c.head_dim);
    std::vector<float> lf(size_t(n * tok.n_vocab())), lt(size_t(n) * kept.size());
    full->forward(ids.data(), n, 0, kv_full, n, lf.data(), pool);
    trimmed->forward(trimmed_ids.data(), n, 0, kv_trim, n, lt.data(), pool);
    for (int64_t p = 0; p < n; ++p)
      for (size_t i = 0; i < kept.size(); ++i) {
        const float a = lf[size_t(p * tok.n_vocab()) + size_t(kept[i])];
        const float b = lt[size_t(p) * kept.size() + i];
        ASSERT_EQ(std::memcmp(&a, &b, 4), 0)
            << "position " << p << ", token " << kept[i] << ": " << a << " vs " << b;
      }
  }
  for (const auto& p : {full_path, synth_path, trim_path}) std::filesystem::remove(p);
}

INSTANTIATE_TEST_SUITE_P(
    Types, VocabTrimModel,
    ::testing::Values(TypeCase{DType::F32, false}, TypeCase{DType::F32, true},
                      TypeCase{DType::F16, false}, TypeCase{DType::Q8_0, false},
                      TypeCase{DType::Q4_0, true}, TypeCase{DType::Q8_C, false},
                      TypeCase{DType::Q4_G128, false}, TypeCase{DType::FP8_E4M3, true}),
    [](const auto& info) {
      return std::string(dtype_name(info.param.type)) + (info.param.tied ? "_tied" : "");
    });

// Every key the trim does not renumber is copied: the task a model carries (shrike.task.*),
// architecture keys, flags; per-token arrays and special ids follow the kept ids.
TEST(VocabTrim, KeepsOtherMetadataAndRenumbersTokenKeys) {
  const auto in = temp_file("keys.gguf"), out = temp_file("keys_out.gguf");
  {
    gguf::GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_uint32("llama.vocab_size", 4);
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "a", "<s>", "</s>"});
    w.set_float32_array("tokenizer.ggml.scores", {0, -1, 0, 0});
    w.set_int32_array("tokenizer.ggml.token_type", {2, 1, 3, 3});
    w.set_uint32("tokenizer.ggml.bos_token_id", 2);
    w.set_uint32("tokenizer.ggml.eos_token_id", 3);
    w.set_string("shrike.task.format", "intent_slots_v1");
    w.set_string_array("shrike.task.intents", {"cancel", "order_status"});
    std::vector<float> rows(8 * 4);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = float(i);
    w.add_tensor("token_embd.weight", DType::F32, {8, 4}, rows.data(), rows.size() * 4);
    w.add_tensor("output_norm.weight", DType::F32, {8}, rows.data(), 8 * 4);
    w.write(in.string());
  }
  const gguf::GgufFile f = gguf::GgufFile::open(in.string());
  EXPECT_EQ(model::special_token_ids(f), (std::vector<int32_t>{2, 3}));
  const model::VocabTrimStats st = model::trim_model_vocab(f, {0, 2, 3}, out.string());
  EXPECT_EQ(st.params_before, 40);
  EXPECT_EQ(st.params_after, 32);
  const gguf::GgufFile t = gguf::GgufFile::open(out.string());
  EXPECT_EQ(t.get_uint("llama.vocab_size"), 3u);
  EXPECT_EQ(t.get_string_array("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"<unk>", "<s>", "</s>"}));
  EXPECT_EQ(t.get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{2, 3, 3}));
  EXPECT_EQ(t.get_uint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(t.get_uint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(t.get_string("shrike.task.format"), "intent_slots_v1");
  EXPECT_EQ(t.get_string_array("shrike.task.intents"),
            (std::vector<std::string>{"cancel", "order_status"}));
  EXPECT_EQ(t.keys().size(), f.keys().size() + 1);  // + shrike.vocab_trim.source_ids
  const auto* e = reinterpret_cast<const float*>(t.tensor("token_embd.weight").data);
  EXPECT_EQ(e[8], 16.0f);   // new row 1 = old row 2
  EXPECT_EQ(e[16], 24.0f);  // new row 2 = old row 3
  // Trimming a trimmed model composes the source ids (ids of the first model, not of t).
  const auto again = temp_file("keys_again.gguf");
  model::trim_model_vocab(t, {0, 1, 2}, again.string());
  EXPECT_EQ(gguf::GgufFile::open(again.string()).get_int_array(model::kTrimSourceIdsKey),
            (std::vector<int64_t>{0, 2, 3}));
  for (const auto& p : {in, out, again}) std::filesystem::remove(p);
}

TEST(VocabTrim, ErrorsNameWhatIsWrong) {
  // A model without a vocabulary.
  const auto bare = temp_file("bare.gguf"), out = temp_file("out.gguf");
  {
    gguf::GgufWriter w;
    w.set_string("general.architecture", "llama");
    const std::vector<float> rows(8 * 4, 0.5f);
    w.add_tensor("token_embd.weight", DType::F32, {8, 4}, rows.data(), rows.size() * 4);
    w.write(bare.string());
  }
  try {
    model::trim_model_vocab(gguf::GgufFile::open(bare.string()), {0}, out.string());
    FAIL() << "no error";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("no vocabulary (tokenizer.ggml.tokens)"),
              std::string::npos)
        << e.what();
  }
  {
    gguf::GgufWriter w;  // 4 embedding rows for 3 tokens
    w.set_string("general.architecture", "llama");
    w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
    const std::vector<float> rows(8 * 4, 0.5f);
    w.add_tensor("token_embd.weight", DType::F32, {8, 4}, rows.data(), rows.size() * 4);
    w.write(bare.string());
  }
  try {
    model::trim_model_vocab(gguf::GgufFile::open(bare.string()), {0, 1, 2}, out.string());
    FAIL() << "no error";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("token_embd.weight is not [dim, 3]"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(bare);

  SHRIKE_REQUIRE_SHARED(kSpm);
  const gguf::GgufFile spm = gguf::GgufFile::open(spm_path());
  EXPECT_THROW(model::trim_model_vocab(spm, {3, 2}, out.string()), std::invalid_argument);
  EXPECT_THROW(model::trim_model_vocab(spm, {0, 40000}, out.string()), std::invalid_argument);
  try {
    model::trim_model_vocab(spm, {0, 2, 3}, out.string());  // BOS (1) dropped
    FAIL() << "no error";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.bos_token_id = 1 names a token that is "
                                         "not kept"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(tokenizer::tokens_to_keep(spm_tokenizer(), {"a"}, {32000}), std::invalid_argument);
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace shrike
