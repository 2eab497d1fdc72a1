// Robustness: every truncation and many deterministic random corruptions of small valid files
// must either open or throw FileError: no crash, no other exception, no out-of-bounds access
// (run under -fsanitize=address,undefined to make the last one visible). Set
// SHRIKE_GGUF_FUZZ_ITERS for a longer run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "gguf/gguf.h"
#include "gguf_test_util.h"

namespace shrike::gguf {
namespace {

// A writer-made file: the common metadata types and three tensor types.
std::vector<uint8_t> writer_file() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("llama.block_count", 2);
  w.set_float32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_bool("flag", true);
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "a", "bc"});
  w.set_float32_array("tokenizer.ggml.scores", {0, -1, -2});
  w.set_int32_array("tokenizer.ggml.token_type", {2, 1, 1});
  const std::vector<uint8_t> d(136, 0x3c);
  w.add_tensor("a", DType::F32, {4, 2}, d.data(), 32);
  w.add_tensor("b", DType::Q8_0, {64}, d.data(), 68);
  w.add_tensor("c", DType::F16, {3}, d.data(), 6);
  const std::string path = testing::temp_path("fuzz_base.gguf");
  w.write(path);
  return testing::read_bytes(path);
}

// A hand-assembled file with the types the writer never produces, nested arrays, a custom
// alignment and a 4-d tensor.
std::vector<uint8_t> raw_file() {
  testing::Raw r;
  r.header(2, 6).kv_u32("general.alignment", 16);
  r.key("i64", ValueType::Int64).put<int64_t>(-5);
  r.key("f64", ValueType::Float64).put<double>(0.5);
  r.key("u16s", ValueType::Array).u32(uint32_t(ValueType::UInt16)).u64(2).put<uint16_t>(1);
  r.put<uint16_t>(2);
  r.key("nested", ValueType::Array).u32(uint32_t(ValueType::Array)).u64(2);
  r.u32(uint32_t(ValueType::String)).u64(1).str("x");
  r.u32(uint32_t(ValueType::Int8)).u64(3).u8(1).u8(2).u8(3);
  r.key("bools", ValueType::Array).u32(uint32_t(ValueType::Bool)).u64(2).u8(0).u8(1);
  r.tensor_info("t4", {1, 2, 1, 2}, uint32_t(DType::BF16), 0);
  r.tensor_info("q4", {32}, uint32_t(DType::Q4_0), 16);
  r.pad(16).zeros(8).pad(16).zeros(18);
  return r.b;
}

// Opens the file and, when it opens, reads everything it exposes through every getter.
void open_and_touch(const std::string& path) {
  try {
    const GgufFile f = GgufFile::open(path);
    volatile uint64_t sink = 0;
    for (const TensorInfo& t : f.tensors())
      for (uint64_t i = 0; i < t.bytes; ++i) sink = sink + t.data[i];
    for (const std::string& k : f.keys()) {
      const auto swallow = [](auto fn) {
        try {
          fn();
        } catch (const FileError&) {
        }
      };
      swallow([&] { f.get_uint(k); });
      swallow([&] { f.get_int(k); });
      swallow([&] { f.get_float(k); });
      swallow([&] { f.get_bool(k); });
      swallow([&] { sink = sink + f.get_string(k).size(); });
      swallow([&] { sink = sink + f.get_string_array(k).size(); });
      swallow([&] { sink = sink + f.get_int_array(k).size(); });
      swallow([&] { sink = sink + f.get_float_array(k).size(); });
    }
  } catch (const FileError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
}

int fuzz_iterations() {
  const char* env = std::getenv("SHRIKE_GGUF_FUZZ_ITERS");
  return env ? std::atoi(env) : 2000;
}

void every_truncation(const std::vector<uint8_t>& good, const std::string& name) {
  const std::string path = testing::temp_path(name);
  testing::write_bytes(path, good);
  uint64_t data_end = 0;
  const GgufFile whole = GgufFile::open(path);
  for (const TensorInfo& t : whole.tensors()) data_end = std::max(data_end, t.offset + t.bytes);
  // Cuts inside the trailing padding leave every tensor whole; every shorter cut must fail.
  for (size_t n = 0; n <= good.size(); ++n) {
    testing::write_bytes(path, std::vector<uint8_t>(good.begin(), good.begin() + n));
    open_and_touch(path);
    EXPECT_EQ(testing::open_error(path) == "<opened without error>", n >= data_end) << n;
  }
}

void random_corruptions(const std::vector<uint8_t>& good, const std::string& name, uint32_t seed) {
  const std::string path = testing::temp_path(name);
  std::mt19937 rng(seed);
  for (int iter = 0, n = fuzz_iterations(); iter < n; ++iter) {
    std::vector<uint8_t> b = good;
    for (int k = 0, flips = 1 + int(rng() % 4); k < flips; ++k) {
      const size_t at = rng() % b.size();
      // Mix bit flips with byte replacements (0xff makes huge lengths, counts and types).
      switch (rng() % 3) {
        case 0:
          b[at] ^= uint8_t(1u << (rng() % 8));
          break;
        case 1:
          b[at] = uint8_t(rng());
          break;
        default:
          b[at] = 0xff;
          break;
      }
    }
    if (rng() % 4 == 0) b.resize(rng() % (b.size() + 1));
    testing::write_bytes(path, b);
    open_and_touch(path);
  }
}

TEST(GgufFuzz, EveryTruncationOfWriterFile) {
  every_truncation(writer_file(), "trunc_w.gguf");
}

TEST(GgufFuzz, EveryTruncationOfHandAssembledFile) {
  every_truncation(raw_file(), "trunc_r.gguf");
}

TEST(GgufFuzz, RandomCorruptionsOfWriterFile) {
  random_corruptions(writer_file(), "flip_w.gguf", 12345);
}

TEST(GgufFuzz, RandomCorruptionsOfHandAssembledFile) {
  random_corruptions(raw_file(), "flip_r.gguf", 678);
}

}  // namespace
}  // namespace shrike::gguf
