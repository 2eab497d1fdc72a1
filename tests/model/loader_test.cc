// Bad model files give one clear error (shrike::FileError naming the file and the problem),
// never a crash. GGUF container damage (truncation, magic, version, offsets, types) is covered in
// tests/gguf; these are the model-level cases.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "gguf/gguf.h"
#include "model/model.h"

namespace shrike {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("shrike_loader_test_" + std::to_string(getpid()) + "_" + name)).string();
}

// A tiny valid one-layer llama GGUF; `edit` may change metadata or tensors before writing.
struct TinyModel {
  std::string arch = "llama";
  int64_t dim = 32, ffn = 64, vocab = 16, heads = 4;
  std::function<void(gguf::GgufWriter&)> extra_metadata;
  std::string skip_tensor;
  std::string misshape_tensor;
  bool block_count_as_string = false;

  std::string write(const std::string& name) const {
    gguf::GgufWriter w;
    w.set_string("general.architecture", arch);
    const std::string a = arch + ".";
    w.set_uint32(a + "embedding_length", uint32_t(dim));
    if (block_count_as_string) w.set_string(a + "block_count", "one");
    else w.set_uint32(a + "block_count", 1);
    w.set_uint32(a + "feed_forward_length", uint32_t(ffn));
    w.set_uint32(a + "attention.head_count", uint32_t(heads));
    w.set_uint32(a + "context_length", 64);
    if (extra_metadata) extra_metadata(w);
    auto add = [&](const std::string& n, std::vector<int64_t> dims) {
      if (n == skip_tensor) return;
      if (n == misshape_tensor) dims[0] *= 2;
      int64_t count = 1;
      for (int64_t d : dims) count *= d;
      std::vector<float> data(static_cast<size_t>(count), 0.01f);
      w.add_tensor(n, DType::F32, dims, data.data(), data.size() * 4);
    };
    add("token_embd.weight", {dim, vocab});
    add("blk.0.attn_norm.weight", {dim});
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output"})
      add(std::string("blk.0.") + m + ".weight", {dim, dim});
    add("blk.0.ffn_norm.weight", {dim});
    add("blk.0.ffn_gate.weight", {dim, ffn});
    add("blk.0.ffn_up.weight", {dim, ffn});
    add("blk.0.ffn_down.weight", {ffn, dim});
    add("output_norm.weight", {dim});
    const std::string path = temp_path(name + ".gguf");
    w.write(path);
    return path;
  }
};

// Expects load_model to throw FileError whose message names the file and contains `phrase`.
void expect_load_error(const std::string& path, const std::string& phrase) {
  try {
    model::load_model(path);
    FAIL() << "loaded " << path << " without error; expected: " << phrase;
  } catch (const FileError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
  std::filesystem::remove(path);
}

TEST(ModelLoader, TinyModelLoads) {
  const std::string path = TinyModel{}.write("ok");
  const auto m = model::load_model(path);
  std::filesystem::remove(path);
  EXPECT_EQ(m->config().dim, 32);
  EXPECT_TRUE(m->config().tied_output);
}

TEST(ModelLoader, MissingTensor) {
  TinyModel t;
  t.skip_tensor = "blk.0.ffn_up.weight";
  expect_load_error(t.write("missing"), "missing tensor 'blk.0.ffn_up.weight'");
}

TEST(ModelLoader, TensorOfTheWrongShape) {
  TinyModel t;
  t.misshape_tensor = "blk.0.attn_k.weight";
  expect_load_error(t.write("misshape"), "tensor 'blk.0.attn_k.weight' has shape [64, 32], expected [32, 32]");
}

TEST(ModelLoader, MetadataOfTheWrongType) {
  TinyModel t;
  t.block_count_as_string = true;
  expect_load_error(t.write("wrongtype"), "llama.block_count");
}

TEST(ModelLoader, AbsurdDimensionInMetadata) {
  TinyModel t;
  t.extra_metadata = [](gguf::GgufWriter& w) { w.set_uint64("llama.attention.head_count_kv", uint64_t(1) << 50); };
  expect_load_error(t.write("absurd"), "absurd");
}

TEST(ModelLoader, HeadCountThatDoesNotDivideTheKvHeads) {
  TinyModel t;
  t.extra_metadata = [](gguf::GgufWriter& w) { w.set_uint32("llama.attention.head_count_kv", 3); };
  expect_load_error(t.write("kvheads"), "kv head count 3");
}

TEST(ModelLoader, UnsupportedArchitecture) {
  TinyModel t;
  t.arch = "mamba";
  expect_load_error(t.write("arch"), "unsupported architecture 'mamba'");
}

TEST(ModelLoader, TokenizerSizeDisagreesWithEmbedding) {
  TinyModel t;
  t.extra_metadata = [](gguf::GgufWriter& w) {
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
  };
  expect_load_error(t.write("vocab"), "tokenizer has 3 tokens");
}

void write_bytes(const std::string& path, const std::vector<int32_t>& words, size_t extra_bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(words.data()), std::streamsize(words.size() * 4));
  std::vector<char> zeros(extra_bytes, 0);
  out.write(zeros.data(), std::streamsize(zeros.size()));
}

TEST(ModelLoader, Llama2cFileShorterThanItsHeaderSays) {
  const std::string path = temp_path("short.bin");
  write_bytes(path, {64, 172, 5, 8, 4, 512, 512}, 1000);
  expect_load_error(path, "but its header implies");
}

TEST(ModelLoader, Llama2cHeaderWithAbsurdValues) {
  const std::string path = temp_path("absurd.bin");
  write_bytes(path, {64, 172, 5, 8, 3, 512, 512}, 1000);  // 8 heads over 3 kv heads
  expect_load_error(path, "kv head count 3");
}

TEST(ModelLoader, FileThatIsNeitherGgufNorLlama2c) {
  const std::string path = temp_path("text.bin");
  std::ofstream(path) << "this is not a model, just some text that is long enough";
  expect_load_error(path, "not a model file");
}

TEST(ModelLoader, EmptyFile) {
  const std::string path = temp_path("empty.bin");
  std::ofstream{path};
  expect_load_error(path, "truncated");
}

TEST(ModelLoader, MissingFile) {
  expect_load_error(temp_path("does_not_exist.gguf"), "cannot open");
}

}  // namespace
}  // namespace shrike
