// tokenizer.json: each reference vocabulary written as Hugging Face would (SentencePiece merges
// ordered by score, byte-level merges with each family's pre-tokenizer, WordPiece with "##")
// loads back to the ids the reference tokenizers produced; malformed files give one-line
// FileErrors naming tokenizer.json (or tokenizer_config.json) and the field.
#include "tokenizer/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <sstream>

#include "gguf/gguf.h"
#include "hf_test_util.h"
#include "shared_data.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer.h"

namespace shrike::tokenizer {
namespace {

using hftest::json;

::testing::Environment* const cleanup =
    ::testing::AddGlobalTestEnvironment(new hftest::ScratchCleanup);

// The reference vocabulary as a Hugging Face folder, loaded back.
struct Loaded {
  Vocab original;
  HfTokenizer hf;
};

Loaded through_hf(const std::string& name) {
  Loaded l;
  l.original = vocab_from_gguf(gguf::GgufFile::open(::shrike::testing::tokenizer_vectors_dir() +
                                                    "/ggml-vocab-" + name + ".gguf"));
  const std::string dir = hftest::scratch("vocab_" + name);
  hftest::write_hf_tokenizer(l.original, dir, "{{ bos_token }}");
  l.hf = load_hf_tokenizer(dir);
  return l;
}

// llama.cpp's test-tokenizer-0 vectors (see ../shared/reference/tokenizers/README.md).
void check_vectors(const std::string& name, const Tokenizer& tok) {
  const std::string base =
      ::shrike::testing::tokenizer_vectors_dir() + "/ggml-vocab-" + name + ".gguf";
  const std::string inp = hftest::read_text(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0, next; (next = inp.find(sep, pos)) != std::string::npos;
       pos = next + sep.size())
    texts.push_back(inp.substr(pos, next - pos));
  std::istringstream out(hftest::read_text(base + ".out"));
  std::vector<std::vector<int32_t>> want;
  for (std::string line; std::getline(out, line);) {
    std::istringstream ls(line);
    want.emplace_back();
    for (int32_t id; ls >> id;) want.back().push_back(id);
  }
  ASSERT_EQ(texts.size(), want.size());
  ASSERT_GE(texts.size(), 40u);
  int ok = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto got = tok.encode(texts[i], false);
    ok += got == want[i];
    EXPECT_EQ(got, want[i]) << name << " test " << i << ": '" << texts[i] << "'";
  }
  std::printf("[ vectors  ] %-14s via tokenizer.json: encode %d/%zu\n", name.c_str(), ok,
              texts.size());
}

class HfTokenizerVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(HfTokenizerVectors, SameIdsAsTheReferenceTokenizer) {
  const std::string name = GetParam();
  SHRIKE_REQUIRE_SHARED("reference/tokenizers/ggml-vocab-" + name + ".gguf");
  const Loaded l = through_hf(name);
  const Vocab& v = l.hf.vocab;
  EXPECT_EQ(v.kind, l.original.kind);
  EXPECT_EQ(v.pieces, l.original.pieces);
  EXPECT_EQ(v.bos_id, l.original.bos_id);
  EXPECT_EQ(v.eos_id, l.original.eos_id);
  EXPECT_EQ(v.add_bos, l.original.add_bos);
  EXPECT_EQ(v.add_space_prefix, l.original.add_space_prefix);
  if (v.kind == VocabKind::Bpe) {
    EXPECT_EQ(v.merges, l.original.merges);
    PreType want, got;
    ASSERT_TRUE(pre_type_from_name(l.original.pre, want));
    ASSERT_TRUE(pre_type_from_name(v.pre, got));
    EXPECT_EQ(got, want) << "pre '" << v.pre << "' for '" << l.original.pre << "'";
  }
  EXPECT_EQ(l.hf.chat_template, "{{ bos_token }}");
  check_vectors(name, Tokenizer(v));

  // The GGUF keys written for it read back to the same vocabulary.
  gguf::GgufWriter w;
  add_vocab_to_gguf(v, l.hf.chat_template, w);
  const std::string path = hftest::scratch("vocab_gguf_" + name) + "/v.gguf";
  w.write(path);
  const auto f = gguf::GgufFile::open(path);
  const Vocab back = vocab_from_gguf(f);
  EXPECT_EQ(back.pieces, v.pieces);
  EXPECT_EQ(back.types, v.types);
  EXPECT_EQ(back.scores, v.scores);
  EXPECT_EQ(back.merges, v.merges);
  EXPECT_EQ(back.pre, v.kind == VocabKind::Bpe ? v.pre : "");
  EXPECT_EQ(back.bos_id, v.bos_id);
  EXPECT_EQ(back.eos_id, v.eos_id);
  EXPECT_EQ(back.add_bos, v.add_bos);
  EXPECT_EQ(f.get_string("tokenizer.chat_template"), "{{ bos_token }}");
}

INSTANTIATE_TEST_SUITE_P(All, HfTokenizerVectors,
                         ::testing::Values("llama-spm", "phi-3", "bert-bge", "gpt-2", "mpt",
                                           "falcon", "starcoder", "refact", "deepseek-coder",
                                           "deepseek-llm"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

// ---- a small byte-level vocabulary written by hand ----

std::string gpt2_chars(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) {
    const uint32_t cp = byte_to_codepoint(b);
    if (cp < 0x80) {
      out += char(cp);
    } else {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

// 256 byte pieces, a few merges, one special token; Qwen2's pre-tokenizer.
json small_bpe() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[gpt2_chars(std::string(1, char(b)))] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {" ", "t"}, {"h", "e"}, {" t", "he"}, {"l", "l"}, {"ll", "o"}};
  json m = json::array();
  int id = 256;
  for (const auto& [a, b] : merges) {
    m.push_back(gpt2_chars(a) + " " + gpt2_chars(b));
    vocab[gpt2_chars(a + b)] = id++;
  }
  return {{"version", "1.0"},
          {"added_tokens", {hftest::added_token(id, "<|endoftext|>", true)}},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer", hftest::family_pre_tokenizer("qwen2")},
          {"post_processor", hftest::byte_level(false)},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}}};
}

std::string write_dir(const std::string& name, const json& tokenizer, const json& config = json(),
                      const json& model_config = json()) {
  const std::string dir = hftest::scratch("tok_" + name);
  hftest::write_text(dir + "/tokenizer.json", tokenizer.dump());
  if (!config.is_null()) hftest::write_text(dir + "/tokenizer_config.json", config.dump());
  if (!model_config.is_null()) hftest::write_text(dir + "/config.json", model_config.dump());
  return dir;
}

TEST(HfTokenizer, SmallByteLevelVocabulary) {
  const std::string dir =
      write_dir("small", small_bpe(), {{"eos_token", "<|endoftext|>"}}, {{"bos_token_id", 261}});
  hftest::write_text(dir + "/chat_template.jinja", "{{ messages }}");
  const HfTokenizer h = load_hf_tokenizer(dir, 270);
  const Vocab& v = h.vocab;
  EXPECT_EQ(v.kind, VocabKind::Bpe);
  EXPECT_EQ(v.pre, "qwen2");
  EXPECT_EQ(v.size(), 270) << "padded to the model's vocabulary";
  EXPECT_EQ(v.pieces[262], "[PAD262]");
  EXPECT_EQ(v.types[262], TokenType::Unused);
  EXPECT_EQ(v.types[261], TokenType::Control);
  EXPECT_EQ(v.eos_id, 261);
  EXPECT_EQ(v.bos_id, 261) << "config.json's bos_token_id";
  EXPECT_FALSE(v.add_bos);
  EXPECT_EQ(h.chat_template, "{{ messages }}");
  const Tokenizer tok(v);
  // " hello": "h e" (rank 1) before "l l" (rank 3) before "ll o"; "Ġ t" never applies.
  EXPECT_EQ(tok.encode(" the hello", false), (std::vector<int32_t>{258, 32, 257, 260}));
  EXPECT_EQ(tok.encode("x<|endoftext|>", false, true), (std::vector<int32_t>{'x', 261}));
  EXPECT_EQ(tok.decode(tok.encode("héllo wörld", false)), "héllo wörld");

  EXPECT_THROW(load_hf_tokenizer(dir, 100), FileError) << "more tokens than the model has";
}

TEST(HfTokenizer, PostProcessorAndConfigDecideBos) {
  json t = small_bpe();
  t["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {hftest::byte_level(false), hftest::template_processing({"<|endoftext|>"}, {})}}};
  const json cfg = {{"bos_token", {{"content", "<|endoftext|>"}, {"lstrip", false}}}};
  EXPECT_TRUE(load_hf_tokenizer(write_dir("bos1", t, cfg)).vocab.add_bos);
  EXPECT_FALSE(load_hf_tokenizer(
                   write_dir("bos2", t, {{"bos_token", "<|endoftext|>"}, {"add_bos_token", false}}))
                   .vocab.add_bos);
}

// ---- malformed tokenizer.json ----

void expect_error(const std::string& dir, const std::string& file, const std::string& phrase) {
  try {
    load_hf_tokenizer(dir);
    FAIL() << "loaded " << dir << " without error; expected: " << phrase;
  } catch (const FileError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(dir + "/" + file), std::string::npos) << msg;
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

void expect_bad(const std::string& name, const std::function<void(json&)>& edit,
                const std::string& phrase) {
  json t = small_bpe();
  edit(t);
  expect_error(write_dir("bad_" + name, t), "tokenizer.json", phrase);
}

TEST(HfTokenizerBad, NotJsonOrMissing) {
  const std::string dir = hftest::scratch("tok_notjson");
  hftest::write_text(dir + "/tokenizer.json", "{\"model\": {");
  expect_error(dir, "tokenizer.json", "not valid JSON");
  hftest::write_text(dir + "/tokenizer.json", "[]");
  expect_error(dir, "tokenizer.json", "not a JSON object");
  std::filesystem::remove(dir + "/tokenizer.json");
  expect_error(dir, "tokenizer.json", "cannot open");
}

TEST(HfTokenizerBad, MissingFields) {
  expect_bad(
      "nomodel", [](json& t) { t.erase("model"); }, "model is missing");
  expect_bad(
      "notype", [](json& t) { t["model"].erase("type"); }, "model.type is missing");
  expect_bad(
      "novocab", [](json& t) { t["model"].erase("vocab"); }, "model.vocab is missing");
  expect_bad(
      "nomerges", [](json& t) { t["model"].erase("merges"); }, "model.merges is missing");
  expect_bad(
      "nocontent", [](json& t) { t["added_tokens"][0].erase("content"); },
      "added_tokens[0].content is missing");
  expect_bad(
      "noid", [](json& t) { t["added_tokens"][0].erase("id"); }, "added_tokens[0].id is missing");
  expect_bad(
      "prenotype", [](json& t) { t["pre_tokenizer"].erase("type"); },
      "pre_tokenizer.type is missing");
}

TEST(HfTokenizerBad, WrongTypedFields) {
  expect_bad(
      "modelarr", [](json& t) { t["model"] = json::array(); },
      "model is array, expected an object");
  expect_bad(
      "typenum", [](json& t) { t["model"]["type"] = 3; },
      "model.type is number, expected a string");
  expect_bad(
      "vocabarr",
      [](json& t) {
        t["model"]["vocab"] = {1, 2};
      },
      "model.vocab is array, expected an object");
  expect_bad(
      "idstr", [](json& t) { t["model"]["vocab"]["a"] = "97"; },
      "model.vocab['a'] is string, expected an integer");
  expect_bad(
      "idneg", [](json& t) { t["model"]["vocab"]["a"] = -1; },
      "model.vocab['a'] is -1, outside 0..");
  expect_bad(
      "idhuge", [](json& t) { t["model"]["vocab"]["a"] = 1ll << 40; }, "outside 0..");
  expect_bad(
      "mergesobj", [](json& t) { t["model"]["merges"] = json::object(); },
      "model.merges is object, expected an array");
  expect_bad(
      "mergenum", [](json& t) { t["model"]["merges"][1] = 7; }, "model.merges[1] is 7, expected");
  expect_bad(
      "addednotarr", [](json& t) { t["added_tokens"] = "x"; },
      "added_tokens is string, expected an array");
  expect_bad(
      "specialstr", [](json& t) { t["added_tokens"][0]["special"] = "yes"; },
      "added_tokens[0].special is string, expected true or false");
  expect_bad(
      "bytelevelbool", [](json& t) { t["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = 1; },
      "use_regex is number, expected true or false");
}

TEST(HfTokenizerBad, MergesNamingUnknownTokens) {
  expect_bad(
      "mergeunknown", [](json& t) { t["model"]["merges"].push_back("\xC4\xA0 zzz"); },
      "model.merges[5] names 'zzz', which is not a token");
  expect_bad(
      "mergeresult", [](json& t) { t["model"]["merges"].push_back("a b"); },
      "model.merges[5] makes 'ab', which is not a token");
  expect_bad(
      "mergeshape", [](json& t) { t["model"]["merges"].push_back("abc"); },
      "model.merges[5] 'abc' is not two tokens separated by one space");
  expect_bad(
      "mergepair",
      [](json& t) {
        t["model"]["merges"].push_back({"a", "q", "x"});
      },
      "model.merges[5] is");
}

TEST(HfTokenizerBad, IdsThatCollide) {
  expect_bad(
      "collide", [](json& t) { t["added_tokens"][0]["id"] = 65; },
      "added_tokens[0]: id 65 is already 'A'");
}

TEST(HfTokenizerBad, UnsupportedKinds) {
  expect_bad(
      "unigram", [](json& t) { t["model"]["type"] = "Unigram"; },
      "model.type 'Unigram' is not supported");
  expect_bad(
      "regex",
      [](json& t) { t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+|\\s+"; },
      "pre-tokenizer sequence [split:\\p{L}+|\\s+, bytelevel] is not one shrike knows");
  expect_bad(
      "prefix",
      [](json& t) {
        t["pre_tokenizer"] = hftest::byte_level(true);
        t["pre_tokenizer"]["add_prefix_space"] = true;
      },
      "add_prefix_space is not supported");
  expect_bad(
      "lower",
      [](json& t) {
        t["normalizer"] = {{"type", "Lowercase"}};
      },
      "normalizer 'Lowercase' is not supported");
  expect_bad(
      "plainbpe", [](json& t) { t["pre_tokenizer"] = nullptr; },
      "neither a ByteLevel pre-tokenizer nor SentencePiece-style");
}

TEST(HfTokenizerBad, SpecialTokensNotInTheVocabulary) {
  expect_error(write_dir("bosmissing", small_bpe(), {{"bos_token", "<s>"}}),
               "tokenizer_config.json", "bos_token '<s>' is not in the vocabulary");
  expect_error(write_dir("eosobj", small_bpe(), {{"eos_token", {{"lstrip", false}}}}),
               "tokenizer_config.json", "eos_token.content is missing");
  expect_error(write_dir("eosnum", small_bpe(), {{"eos_token", 5}}), "tokenizer_config.json",
               "eos_token is number");
  expect_error(write_dir("cfgnotjson", small_bpe(), "x"), "tokenizer_config.json",
               "not a JSON object");
  expect_error(write_dir("bosid", small_bpe(), json::object(), {{"bos_token_id", 9999}}),
               "config.json", "bos_token_id 9999 is outside the 262-token vocabulary");
  expect_error(write_dir("tmpl", small_bpe(), {{"chat_template", 5}}), "tokenizer_config.json",
               "chat_template is number");
}

}  // namespace
}  // namespace shrike::tokenizer
