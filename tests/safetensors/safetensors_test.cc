// safetensors: what the writer writes reads back; every malformed header gives one FileError line
// naming the file and the problem; random damage never crashes.
#include "safetensors/safetensors.h"

#include <gtest/gtest.h>

#include <random>

#include "hf_test_util.h"

namespace shrike::safetensors {
namespace {

using hftest::json;

::testing::Environment* const cleanup =
    ::testing::AddGlobalTestEnvironment(new hftest::ScratchCleanup);

std::vector<uint8_t> le64(uint64_t v) {
  std::vector<uint8_t> b(8);
  for (int i = 0; i < 8; ++i) b[size_t(i)] = uint8_t(v >> (8 * i));
  return b;
}

// A file of an 8-byte length, the header text and data_bytes zero bytes.
std::string raw_file(const std::string& name, const std::string& header, size_t data_bytes,
                     std::optional<uint64_t> claimed_length = std::nullopt) {
  const std::string path = hftest::scratch("st_" + name) + "/x.safetensors";
  std::vector<uint8_t> b = le64(claimed_length.value_or(header.size()));
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes, 0);
  hftest::write_text(path, std::string(b.begin(), b.end()));
  return path;
}

void expect_error(const std::string& path, const std::string& phrase) {
  try {
    SafetensorsFile::open(path);
    FAIL() << "opened " << path << " without error; expected: " << phrase;
  } catch (const FileError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

TEST(Safetensors, WriterOutputReadsBack) {
  Writer w;
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -8.5f};
  const std::vector<uint16_t> b = {fp32_to_fp16(1.0f), fp32_to_fp16(-0.5f), fp32_to_fp16(2.0f)};
  const std::vector<uint16_t> c = {fp32_to_bf16(3.0f)};
  w.add("half", DType::F16, {3}, b.data(), b.size() * 2);  // added first, stored after the f32
  w.add("matrix", DType::F32, {2, 3}, a.data(), a.size() * 4);
  w.add("one", DType::BF16, {1, 1}, c.data(), 2);
  w.set_metadata("format", "pt");
  const std::string path = hftest::scratch("st_roundtrip") + "/m.safetensors";
  w.write(path);

  const auto f = SafetensorsFile::open(path);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const Tensor* m = f.find("matrix");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->dtype, "F32");
  EXPECT_EQ(m->type, DType::F32);
  EXPECT_EQ(m->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m->elements(), 6);
  ASSERT_EQ(m->bytes, 24u);
  EXPECT_EQ(std::memcmp(m->data, a.data(), 24), 0);
  EXPECT_EQ(m->offset % 8, 0u) << "data starts 8-aligned";
  const Tensor* h = f.find("half");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->type, DType::F16);
  EXPECT_EQ(std::memcmp(h->data, b.data(), 6), 0);
  EXPECT_GT(h->offset, m->offset) << "wider dtypes first keeps every tensor aligned";
  EXPECT_EQ(f.find("one")->type, DType::BF16);
  EXPECT_EQ(f.find("absent"), nullptr);

  // The header is what the reference writer produces: contiguous offsets from 0.
  const std::string bytes = hftest::read_text(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | uint8_t(bytes[size_t(i)]);
  EXPECT_EQ(n % 8, 0u);
  const json header = json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["matrix"]["data_offsets"], json({0, 24}));
  EXPECT_EQ(header["half"]["data_offsets"], json({24, 30}));
  EXPECT_EQ(header["one"]["data_offsets"], json({30, 32}));
  EXPECT_EQ(bytes.size(), 8 + n + 32);
}

TEST(Safetensors, OtherDtypesAreReadButNotTyped) {
  const auto path = raw_file(
      "i64", R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},"__metadata__":{}})", 16);
  const auto f = SafetensorsFile::open(path);
  ASSERT_NE(f.find("ids"), nullptr);
  EXPECT_EQ(f.find("ids")->dtype, "I64");
  EXPECT_FALSE(f.find("ids")->type.has_value());
}

TEST(Safetensors, EmptyFileAndEmptyHeader) {
  const std::string path = hftest::scratch("st_empty") + "/x.safetensors";
  hftest::write_text(path, "");
  expect_error(path, "truncated");
  const auto f = SafetensorsFile::open(raw_file("emptyobj", "{}", 0));
  EXPECT_TRUE(f.tensors().empty());
}

TEST(SafetensorsBad, HeaderLengthPastEndOfFile) {
  expect_error(raw_file("past", "{}", 0, 1000), "runs past the end of the file");
}

TEST(SafetensorsBad, HeaderLengthHuge) {
  expect_error(raw_file("huge", "{}", 0, uint64_t(1) << 62), "absurd");
  expect_error(raw_file("huge2", "{}", 0, kMaxHeaderBytes + 1), "absurd");
}

TEST(SafetensorsBad, HeaderNotJson) {
  expect_error(raw_file("notjson", "{\"a\": [1, 2", 0), "header is not valid JSON");
  expect_error(raw_file("garbage", "\x01\x02\x03\xff", 0), "header is not valid JSON");
}

TEST(SafetensorsBad, HeaderNotAnObject) {
  expect_error(raw_file("array", "[1, 2, 3]", 0), "header is not a JSON object");
}

TEST(SafetensorsBad, TensorEntryNotAnObject) {
  expect_error(raw_file("entry", R"({"w": [0, 4]})", 4), "tensor 'w' is not a JSON object");
}

TEST(SafetensorsBad, MissingFields) {
  expect_error(raw_file("nodtype", R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4),
               "tensor 'w' has no dtype");
  expect_error(raw_file("noshape", R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4),
               "tensor 'w' has no shape");
  expect_error(raw_file("nooffsets", R"({"w":{"dtype":"F32","shape":[1]}})", 4),
               "tensor 'w' has no data_offsets");
}

TEST(SafetensorsBad, WrongTypedFields) {
  expect_error(raw_file("dtypenum", R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", 4),
               "dtype is not a string");
  expect_error(raw_file("shapestr", R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", 4),
               "shape is not an array");
  expect_error(
      raw_file("shapeflt", R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
      "not an integer");
  expect_error(
      raw_file("shapeneg", R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
      "negative dimension");
  expect_error(
      raw_file("shapebig",
               R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4),
      "absurd shape");
  for (const char* offsets : {"[0]", "[0,4,8]", "\"0-4\"", "[-4,0]", "[0,4.0]"})
    expect_error(
        raw_file("offs",
                 std::string(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":)") + offsets + "}}",
                 8),
        "data_offsets is not an array of two non-negative integers");
}

TEST(SafetensorsBad, UnknownDtype) {
  expect_error(raw_file("dtype", R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})", 4),
               "unknown dtype 'Q4'");
}

TEST(SafetensorsBad, OffsetsOutOfRange) {
  expect_error(raw_file("range", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 12),
               "run past the end of the data (12 bytes)");
  expect_error(
      raw_file(
          "range2",
          R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,18446744073709551615]}})",
          4),
      "run past the end of the data");
}

TEST(SafetensorsBad, EndBeforeBegin) {
  expect_error(raw_file("endbegin", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8),
               "end 4 is before their begin 8");
}

TEST(SafetensorsBad, SizeDoesNotMatchDtypeAndShape) {
  expect_error(raw_file("size", R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,12]}})", 24),
               "holds 12 bytes but F32 x 6 elements needs 24");
  expect_error(
      raw_file("size16", R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,12]}})", 12),
      "holds 12 bytes but BF16 x 3 elements needs 6");
}

TEST(SafetensorsBad, OverlappingTensors) {
  expect_error(raw_file("overlap",
                        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        12),
               "overlap");
  // Two names for the same bytes overlap too.
  expect_error(raw_file("alias",
                        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})",
                        8),
               "overlap");
}

TEST(SafetensorsBad, DuplicateNames) {
  expect_error(raw_file("dup",
                        R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                        8),
               "names 'a' twice");
}

TEST(SafetensorsBad, MetadataNotStrings) {
  expect_error(raw_file("meta", R"({"__metadata__":{"format":1}})", 0),
               "__metadata__ 'format' is not a string");
  expect_error(raw_file("meta2", R"({"__metadata__":[1]})", 0), "__metadata__ is not an object");
}

// Random byte damage to a valid file's header and length: open either succeeds (the damage was
// harmless) or throws FileError; nothing else.
TEST(SafetensorsBad, RandomDamageNeverCrashes) {
  Writer w;
  std::vector<float> a(24, 1.0f);
  w.add("model.layers.0.w", DType::F32, {4, 6}, a.data(), 96);
  w.add("model.norm", DType::F16, {8}, a.data(), 16);
  const std::vector<uint8_t> good = w.bytes();
  std::mt19937 rng(7);
  const std::string path = hftest::scratch("st_fuzz") + "/x.safetensors";
  int ok = 0, rejected = 0;
  for (int i = 0; i < 400; ++i) {
    std::vector<uint8_t> b = good;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t pos = i % 5 == 0 ? rng() % 8 : rng() % (b.size() - 96 - 16);
      b[pos] = uint8_t(rng());
    }
    if (i % 7 == 0) b.resize(rng() % b.size());
    hftest::write_text(path, std::string(b.begin(), b.end()));
    try {
      const auto f = SafetensorsFile::open(path);
      for (const auto& t : f.tensors()) ASSERT_LE(t.offset + t.bytes, b.size());
      ++ok;
    } catch (const FileError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 300);
  std::printf("[ fuzz     ] safetensors: %d damaged files opened, %d rejected\n", ok, rejected);
}

// ---- sharded checkpoints ----

std::string two_shards(const std::string& name) {
  const std::string dir = hftest::scratch("st_shards_" + name);
  const std::vector<float> a = {1, 2, 3, 4};
  Writer w1, w2;
  w1.add("a", DType::F32, {4}, a.data(), 16);
  w2.add("b", DType::F32, {2, 2}, a.data(), 16);
  w1.write(dir + "/model-00001-of-00002.safetensors");
  w2.write(dir + "/model-00002-of-00002.safetensors");
  return dir;
}

void expect_dir_error(const std::string& dir, const std::string& phrase) {
  try {
    Checkpoint::open_dir(dir);
    FAIL() << "opened " << dir << " without error; expected: " << phrase;
  } catch (const FileError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(dir), std::string::npos) << msg;
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(SafetensorsShards, IndexJoinsShards) {
  const std::string dir = two_shards("ok");
  write_index(dir + "/model.safetensors.index.json", {{"a", "model-00001-of-00002.safetensors"},
                                                      {"b", "model-00002-of-00002.safetensors"}});
  const auto c = Checkpoint::open_dir(dir);
  EXPECT_EQ(c.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c.get("b").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_NE(c.file_of("b").find("model-00002-of-00002"), std::string::npos);
  try {
    c.get("c");
    FAIL();
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor 'c'"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsShards, SingleFileWithoutIndex) {
  const std::string dir = hftest::scratch("st_single");
  Writer w;
  const float x = 1;
  w.add("x", DType::F32, {1}, &x, 4);
  w.write(dir + "/model.safetensors");
  EXPECT_EQ(Checkpoint::open_dir(dir).names(), std::vector<std::string>{"x"});
  expect_dir_error(hftest::scratch("st_nothing"), "no model.safetensors");
}

TEST(SafetensorsShards, IndexNamingAMissingShard) {
  const std::string dir = two_shards("missing");
  write_index(dir + "/model.safetensors.index.json", {{"a", "model-00001-of-00002.safetensors"},
                                                      {"b", "model-00003-of-00002.safetensors"}});
  expect_dir_error(dir, "shard 'model-00003-of-00002.safetensors' (holding 'b') is missing");
}

TEST(SafetensorsShards, IndexNamingATensorTheShardLacks) {
  const std::string dir = two_shards("lacks");
  write_index(dir + "/model.safetensors.index.json", {{"a", "model-00001-of-00002.safetensors"},
                                                      {"b", "model-00001-of-00002.safetensors"}});
  expect_dir_error(dir,
                   "tensor 'b' is mapped to shard 'model-00001-of-00002.safetensors', which "
                   "does not hold it");
}

TEST(SafetensorsShards, MalformedIndex) {
  const std::string dir = two_shards("bad");
  const std::string index = dir + "/model.safetensors.index.json";
  hftest::write_text(index, "{\"weight_map\": ");
  expect_dir_error(dir, "index is not valid JSON");
  hftest::write_text(index, R"({"metadata": {}})");
  expect_dir_error(dir, "no weight_map object");
  hftest::write_text(index, R"({"weight_map": {"a": 1}})");
  expect_dir_error(dir, "weight_map entry 'a' is not a string");
  hftest::write_text(index, R"({"weight_map": {"a": "../../etc/passwd"}})");
  expect_dir_error(dir, "not a file name in the model folder");
  hftest::write_text(index, R"({"weight_map": {"a": "model-00001-of-00002.safetensors",)"
                            R"( "a": "model-00002-of-00002.safetensors"}})");
  expect_dir_error(dir, "names 'a' twice");
}

}  // namespace
}  // namespace shrike::safetensors
