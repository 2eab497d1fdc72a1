// Writer -> reader round trips, a hand-assembled file using every metadata type, and the real
// GGUF files in ../shared.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <numeric>

#include "gguf/gguf.h"
#include "gguf_test_util.h"
#include "shared_data.h"

namespace shrike::gguf {
namespace {

using testing::Raw;
using testing::temp_path;

[[maybe_unused]] ::testing::Environment* const cleanup =
    ::testing::AddGlobalTestEnvironment(new testing::TempDirCleanup);

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + i * 7);
  return v;
}

TEST(GgufRoundTrip, EveryWriterMetadataType) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("u32", 4000000000u);
  w.set_int32("i32", -7);
  w.set_uint64("u64", 1ull << 40);
  w.set_float32("f32", 1.5f);
  w.set_bool("yes", true);
  w.set_bool("no", false);
  w.set_string("empty", "");
  w.set_string_array("strs", {"a", "", "\xe2\x96\x81hello"});
  w.set_float32_array("floats", {0.25f, -2.0f});
  w.set_int32_array("ints", {1, -2, 2147483647});
  w.set_int32_array("empty_ints", {});
  const std::string path = temp_path("meta.gguf");
  w.write(path);

  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.path(), path);
  const std::vector<std::string> order = {"general.architecture",
                                          "u32",
                                          "i32",
                                          "u64",
                                          "f32",
                                          "yes",
                                          "no",
                                          "empty",
                                          "strs",
                                          "floats",
                                          "ints",
                                          "empty_ints"};
  EXPECT_EQ(f.keys(), order);  // insertion order survives
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("u32"), 4000000000u);
  EXPECT_EQ(f.get_int("u32"), 4000000000);
  EXPECT_EQ(f.get_int("i32"), -7);
  EXPECT_EQ(f.get_uint("u64"), 1ull << 40);
  EXPECT_EQ(f.get_float("f32"), 1.5);
  EXPECT_TRUE(f.get_bool("yes"));
  EXPECT_FALSE(f.get_bool("no"));
  EXPECT_EQ(f.get_string("empty"), "");
  EXPECT_EQ(f.get_string_array("strs"), (std::vector<std::string>{"a", "", "\xe2\x96\x81hello"}));
  EXPECT_EQ(f.get_float_array("floats"), (std::vector<double>{0.25, -2.0}));
  EXPECT_EQ(f.get_int_array("ints"), (std::vector<int64_t>{1, -2, 2147483647}));
  EXPECT_TRUE(f.get_int_array("empty_ints").empty());
  EXPECT_EQ(f.find("strs")->array_size, 3u);
  EXPECT_EQ(f.find("ints")->elem_type, ValueType::Int32);
  // Defaults apply only when the key is absent.
  EXPECT_EQ(f.get_string_or("nope", "d"), "d");
  EXPECT_EQ(f.get_string_or("general.architecture", "d"), "llama");
  EXPECT_EQ(f.get_uint_or("nope", 9), 9u);
  EXPECT_EQ(f.get_uint_or("u32", 9), 4000000000u);
  EXPECT_EQ(f.get_float_or("nope", 2.5), 2.5);
  EXPECT_EQ(f.get_float_or("f32", 2.5), 1.5);
  EXPECT_TRUE(f.get_bool_or("nope", true));
  EXPECT_FALSE(f.get_bool_or("no", true));
  EXPECT_TRUE(f.has("i32"));
  EXPECT_FALSE(f.has("nope"));
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_TRUE(f.tensors().empty());
}

TEST(GgufRoundTrip, RepeatedKeyReplacesInPlace) {
  GgufWriter w;
  w.set_uint32("a", 1);
  w.set_uint32("b", 2);
  w.set_string("a", "again");
  const std::string path = temp_path("replace.gguf");
  w.write(path);
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f.get_string("a"), "again");
}

TEST(GgufRoundTrip, EveryTensorType) {
  struct Case {
    std::string name;
    DType type;
    std::vector<int64_t> dims;
  };
  const std::vector<Case> cases = {
      {"t.f32", DType::F32, {5, 3}},          {"t.f16", DType::F16, {7}},
      {"t.bf16", DType::BF16, {3, 2, 2}},     {"t.q8_0", DType::Q8_0, {64, 3}},
      {"t.q4_0", DType::Q4_0, {32, 1, 1, 2}},
  };
  GgufWriter w;
  w.set_string("general.architecture", "test");
  std::vector<std::vector<uint8_t>> datas;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const int64_t rows =
        std::accumulate(c.dims.begin() + 1, c.dims.end(), int64_t(1), std::multiplies<>());
    datas.push_back(pattern(size_t(dtype_row_bytes(c.type, c.dims[0]) * rows), uint8_t(i)));
    w.add_tensor(c.name, c.type, c.dims, datas.back().data(), datas.back().size());
  }
  const std::string path = temp_path("tensors.gguf");
  w.write(path);

  const GgufFile f = GgufFile::open(path);
  ASSERT_EQ(f.tensors().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];  // insertion order survives
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, cases[i].name);
    EXPECT_EQ(&f.tensor(cases[i].name), &t);
    EXPECT_EQ(t.type, cases[i].type);
    EXPECT_EQ(t.dims, cases[i].dims);
    EXPECT_EQ(t.bytes, datas[i].size());
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_LE(t.offset + t.bytes, f.file_size());
    EXPECT_EQ(t.elements(), std::accumulate(cases[i].dims.begin(), cases[i].dims.end(), int64_t(1),
                                            std::multiplies<>()));
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.bytes), datas[i]);
  }
  EXPECT_EQ(f.find_tensor("absent"), nullptr);
}

TEST(GgufRoundTrip, CustomAlignmentIsHonoured) {
  GgufWriter w;
  w.set_uint32("general.alignment", 64);
  const std::vector<float> a(3, 1.0f), b(5, 2.0f);
  w.add_tensor("a", DType::F32, {3}, a.data(), a.size() * 4);
  w.add_tensor("b", DType::F32, {5}, b.data(), b.size() * 4);
  const std::string path = temp_path("align64.gguf");
  w.write(path);
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.alignment(), 64u);
  for (const TensorInfo& t : f.tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.name;
  EXPECT_EQ(f.tensor("b").offset - f.tensor("a").offset, 64u);
}

TEST(GgufRoundTrip, WriterRejectsBadTensors) {
  GgufWriter w;
  const std::vector<uint8_t> d(136);
  EXPECT_THROW(w.add_tensor("x", DType::F32, {3}, d.data(), 8), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("x", DType::Q8_0, {16}, d.data(), 17), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("x", DType::F32, {}, d.data(), 0), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("x", DType::F32, {1, 1, 1, 1, 1}, d.data(), 4), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("x", DType::F32, {0}, d.data(), 0), std::invalid_argument);
  w.add_tensor("x", DType::Q8_0, {128}, d.data(), 136);
  EXPECT_THROW(w.add_tensor("x", DType::Q8_0, {128}, d.data(), 136), std::invalid_argument);
}

TEST(GgufRoundTrip, WriteToUnwritablePathThrowsFileError) {
  GgufWriter w;
  const std::string path = temp_path("no/such/dir/x.gguf");
  const std::string msg = testing::error_of([&] { w.write(path); });
  testing::expect_error(msg, path, "cannot create");
}

// The writer only produces some types; the reader must handle all thirteen, including arrays
// of every element type and arrays of arrays (read and validated, contents dropped).
TEST(GgufRead, EveryValueTypeFromHandAssembledFile) {
  Raw r;
  r.header(0, 19);
  r.key("u8", ValueType::UInt8).u8(200);
  r.key("i8", ValueType::Int8).put<int8_t>(-100);
  r.key("u16", ValueType::UInt16).put<uint16_t>(60000);
  r.key("i16", ValueType::Int16).put<int16_t>(-30000);
  r.key("u32", ValueType::UInt32).u32(7);
  r.key("i32", ValueType::Int32).put<int32_t>(-7);
  r.key("f32", ValueType::Float32).put<float>(0.5f);
  r.key("bool", ValueType::Bool).u8(1);
  r.key("str", ValueType::String).str("hi");
  r.key("u64", ValueType::UInt64).u64(~0ull);
  r.key("i64", ValueType::Int64).put<int64_t>(-(1ll << 50));
  r.key("f64", ValueType::Float64).put<double>(-0.125);
  r.key("arr_u8", ValueType::Array).u32(uint32_t(ValueType::UInt8)).u64(2).u8(1).u8(255);
  r.key("arr_i16", ValueType::Array).u32(uint32_t(ValueType::Int16)).u64(1).put<int16_t>(-5);
  r.key("arr_bool", ValueType::Array).u32(uint32_t(ValueType::Bool)).u64(2).u8(0).u8(1);
  r.key("arr_f64", ValueType::Array).u32(uint32_t(ValueType::Float64)).u64(1).put<double>(3.25);
  r.key("arr_u64", ValueType::Array).u32(uint32_t(ValueType::UInt64)).u64(1).u64(~0ull);
  r.key("arr_arr", ValueType::Array).u32(uint32_t(ValueType::Array)).u64(2);
  r.u32(uint32_t(ValueType::UInt32)).u64(1).u32(9);
  r.u32(uint32_t(ValueType::String)).u64(2).str("x").str("yz");
  r.key("general.alignment", ValueType::UInt32).u32(16);
  const std::string path = r.save("alltypes.gguf");

  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.keys().size(), 19u);
  EXPECT_EQ(f.alignment(), 16u);
  EXPECT_EQ(f.get_uint("u8"), 200u);
  EXPECT_EQ(f.get_int("i8"), -100);
  EXPECT_EQ(f.get_uint("u16"), 60000u);
  EXPECT_EQ(f.get_int("i16"), -30000);
  EXPECT_EQ(f.get_uint_or("absent", 0), 0u);
  EXPECT_EQ(f.get_int("i32"), -7);
  EXPECT_EQ(f.get_uint("u32"), 7u);
  EXPECT_EQ(f.get_float("f32"), 0.5);
  EXPECT_TRUE(f.get_bool("bool"));
  EXPECT_EQ(f.get_string("str"), "hi");
  EXPECT_EQ(f.get_uint("u64"), ~0ull);
  EXPECT_EQ(f.get_int("i64"), -(1ll << 50));
  EXPECT_EQ(f.get_float("f64"), -0.125);
  EXPECT_EQ(f.get_int_array("arr_u8"), (std::vector<int64_t>{1, 255}));
  EXPECT_EQ(f.get_int_array("arr_i16"), (std::vector<int64_t>{-5}));
  EXPECT_EQ(f.get_int_array("arr_bool"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(f.get_float_array("arr_f64"), (std::vector<double>{3.25}));
  EXPECT_EQ(f.find("arr_arr")->array_size, 2u);
  EXPECT_EQ(f.find("arr_arr")->elem_type, ValueType::Array);
  // Values that do not fit the getter's return type are errors, not silent wraps.
  testing::expect_error(testing::error_of([&] { f.get_int("u64"); }), path,
                        "out of range for int64");
  testing::expect_error(testing::error_of([&] { f.get_uint("i64"); }), path,
                        "expected a non-negative integer");
  testing::expect_error(testing::error_of([&] { f.get_int_array("arr_u64"); }), path,
                        "out of range for int64");
  testing::expect_error(testing::error_of([&] { f.get_int_array("arr_arr"); }), path,
                        "is array of array, expected array of integer");
}

TEST(GgufRead, VersionTwoIsAccepted) {
  const std::string path = Raw().header(0, 1, 2).kv_str("general.name", "v2").save("v2.gguf");
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.get_string("general.name"), "v2");
}

// A file with no tensors may end right after its metadata (no padding to the data section).
TEST(GgufRead, VocabOnlyFileWithoutPadding) {
  const std::string path = Raw().header(0, 1).kv_str("a", "b").save("nopad.gguf");
  EXPECT_EQ(GgufFile::open(path).get_string("a"), "b");
}

TEST(GgufShared, Stories260K) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/stories260K.gguf");
  const GgufFile f =
      GgufFile::open(shrike::testing::shared_dir() + "/reference/stories260K/stories260K.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(f.get_uint("llama.block_count"), 5u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 512u);
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores").size(), 512u);
  EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type").size(), 512u);
  const TensorInfo& emb = f.tensor("token_embd.weight");
  EXPECT_EQ(emb.dims, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb.type, DType::F32);
  EXPECT_EQ(emb.bytes, 64u * 512 * 4);
  for (const TensorInfo& t : f.tensors()) EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
}

// Re-encoding the llama.cpp-written stories260K with our writer reproduces it byte for byte when
// every metadata type is one the writer supports: the strongest check that our layout is the
// standard one llama.cpp loads.
TEST(GgufShared, RewritingStories260KReproducesTheFile) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/stories260K.gguf");
  const std::string src = shrike::testing::shared_dir() + "/reference/stories260K/stories260K.gguf";
  const GgufFile f = GgufFile::open(src);
  GgufWriter w;
  for (const std::string& k : f.keys()) {
    const Value& v = *f.find(k);
    switch (v.type) {
      case ValueType::UInt32:
        w.set_uint32(k, uint32_t(v.u));
        break;
      case ValueType::Int32:
        w.set_int32(k, int32_t(v.i));
        break;
      case ValueType::UInt64:
        w.set_uint64(k, v.u);
        break;
      case ValueType::Float32:
        w.set_float32(k, float(v.f));
        break;
      case ValueType::Bool:
        w.set_bool(k, v.i != 0);
        break;
      case ValueType::String:
        w.set_string(k, v.s);
        break;
      case ValueType::Array:
        if (v.elem_type == ValueType::String) {
          w.set_string_array(k, v.strings);
        } else if (v.elem_type == ValueType::Float32) {
          w.set_float32_array(k, std::vector<float>(v.floats.begin(), v.floats.end()));
        } else if (v.elem_type == ValueType::Int32) {
          w.set_int32_array(k, std::vector<int32_t>(v.ints.begin(), v.ints.end()));
        } else {
          GTEST_SKIP() << k << ": array type the writer cannot produce";
        }
        break;
      default:
        GTEST_SKIP() << k << ": type the writer cannot produce";
    }
  }
  for (const TensorInfo& t : f.tensors()) w.add_tensor(t.name, t.type, t.dims, t.data, t.bytes);
  const std::string out = temp_path("stories260K.rewritten.gguf");
  w.write(out);
  EXPECT_TRUE(testing::read_bytes(out) == testing::read_bytes(src));
}

TEST(GgufShared, EveryVocabFileOpens) {
  SHRIKE_REQUIRE_SHARED("reference/tokenizers");
  int opened = 0;
  for (const auto& e : std::filesystem::directory_iterator(shrike::testing::shared_dir() +
                                                           "/reference/tokenizers")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ggml-vocab-", 0) != 0 || e.path().extension() != ".gguf") continue;
    SCOPED_TRACE(name);
    const GgufFile f = GgufFile::open(e.path().string());
    EXPECT_GT(f.get_string_array("tokenizer.ggml.tokens").size(), 1000u);
    EXPECT_FALSE(f.get_string("tokenizer.ggml.model").empty());
    ++opened;
  }
  EXPECT_GT(opened, 0);
}

}  // namespace
}  // namespace shrike::gguf
