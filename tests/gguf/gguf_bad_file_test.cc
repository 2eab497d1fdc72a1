// One test per way a GGUF file can be broken. Each asserts that opening (or the getter) throws
// FileError with a one-line message naming the file and saying what is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf_test_util.h"

namespace shrike::gguf {
namespace {

using testing::error_of;
using testing::expect_error;
using testing::Raw;
using testing::temp_path;

constexpr uint32_t kF32 = 0, kQ8_0 = 8;

struct Info {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type;
  uint64_t offset;
};

// A v3 file with the given tensor infos, padding, then `data_bytes` bytes of tensor data.
Raw with_tensors(const std::vector<Info>& infos, size_t data_bytes) {
  Raw r;
  r.header(infos.size(), 1).kv_str("general.architecture", "llama");
  for (const Info& i : infos) r.tensor_info(i.name, i.dims, i.type, i.offset);
  return r.pad().zeros(data_bytes);
}

// A valid writer-made file with metadata and two tensors, the base for the truncation tests.
// The long description keeps enough bytes after each cut that the counts stay plausible, so the
// reader reports the truncation where it happens rather than an impossible count.
std::string good_file(const std::string& name) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("llama.block_count", 5);
  w.set_string("general.description", std::string(200, 'd'));
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
  const std::vector<float> a(8, 1.0f), b(16, 2.0f);
  w.add_tensor("blk.0.attn_q.weight", DType::F32, {8}, a.data(), a.size() * 4);
  w.add_tensor("blk.0.attn_k.weight", DType::F32, {4, 4}, b.data(), b.size() * 4);
  const std::string path = temp_path(name);
  w.write(path);
  return path;
}

// Writes the first n bytes of `src` to a new scratch file.
std::string truncated_copy(const std::string& src, size_t n, const std::string& name) {
  std::vector<uint8_t> b = testing::read_bytes(src);
  b.resize(n);
  const std::string path = temp_path(name);
  testing::write_bytes(path, b);
  return path;
}

size_t find(const std::vector<uint8_t>& hay, const std::string& needle) {
  const auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end());
  EXPECT_NE(it, hay.end()) << needle;
  return size_t(it - hay.begin());
}

TEST(GgufBadFile, MissingFile) {
  EXPECT_OPEN_FAILS(temp_path("does-not-exist.gguf"), "cannot open");
}

TEST(GgufBadFile, EmptyFile) {
  EXPECT_OPEN_FAILS(Raw().save("empty.gguf"), "truncated: magic");
}

TEST(GgufBadFile, TruncatedInHeader) {
  const std::string good = good_file("trunc_header_src.gguf");
  const std::string p = truncated_copy(good, 10, "trunc_header.gguf");
  EXPECT_OPEN_FAILS(p, "truncated: tensor count needs 8 bytes at offset 8, file is 10 bytes");
}

TEST(GgufBadFile, TruncatedInMetadataKey) {
  const std::string good = good_file("trunc_key_src.gguf");
  const size_t at = find(testing::read_bytes(good), "tokenizer.ggml.tokens") + 3;
  EXPECT_OPEN_FAILS(truncated_copy(good, at, "trunc_key.gguf"),
                    "truncated: metadata key 3 (21-byte string) needs 21 bytes at offset " +
                        std::to_string(at - 3) + ", file is " + std::to_string(at) + " bytes");
}

TEST(GgufBadFile, TruncatedInMetadataValue) {
  const std::string good = good_file("trunc_value_src.gguf");
  const size_t at = find(testing::read_bytes(good), std::string(200, 'd')) + 150;
  EXPECT_OPEN_FAILS(truncated_copy(good, at, "trunc_value.gguf"),
                    "truncated: metadata 'general.description' value (200-byte string)");
}

TEST(GgufBadFile, TruncatedInTensorInfo) {
  const std::string good = good_file("trunc_info_src.gguf");
  const size_t at = find(testing::read_bytes(good), "blk.0.attn_k.weight") + 19 + 4 + 3;
  EXPECT_OPEN_FAILS(truncated_copy(good, at, "trunc_info.gguf"),
                    "truncated: tensor 'blk.0.attn_k.weight' dimension 0");
}

TEST(GgufBadFile, TruncatedInTensorData) {
  const std::string good = good_file("trunc_data_src.gguf");
  const size_t size = testing::read_bytes(good).size();
  EXPECT_OPEN_FAILS(truncated_copy(good, size - 10, "trunc_data.gguf"),
                    "tensor 'blk.0.attn_k.weight' extends past end of file");
}

TEST(GgufBadFile, WrongMagic) {
  Raw r;
  r.header(0, 0);
  std::copy_n("ABCD", 4, r.b.begin());
  EXPECT_OPEN_FAILS(r.save("magic.gguf"), "not a GGUF file (magic 'ABCD')");
}

TEST(GgufBadFile, BinaryMagicIsEscaped) {
  Raw r;
  r.header(0, 0);
  r.b[0] = '\n';
  EXPECT_OPEN_FAILS(r.save("magic_nl.gguf"), "not a GGUF file (magic '\\x0aGUF')");
}

TEST(GgufBadFile, VersionOne) {
  EXPECT_OPEN_FAILS(Raw().header(0, 0, 1).save("v1.gguf"), "unsupported GGUF version 1");
}

TEST(GgufBadFile, VersionNinetyNine) {
  EXPECT_OPEN_FAILS(Raw().header(0, 0, 99).save("v99.gguf"), "unsupported GGUF version 99");
}

TEST(GgufBadFile, BigEndianFile) {
  EXPECT_OPEN_FAILS(Raw().header(0, 0, 0x03000000).save("be.gguf"), "big-endian");
}

TEST(GgufBadFile, TensorPastEndOfFile) {
  const std::string p =
      with_tensors({{"blk.3.attn_q.weight", {64}, kF32, 0}}, 100).save("past.gguf");
  EXPECT_OPEN_FAILS(p, "tensor 'blk.3.attn_q.weight' extends past end of file");
}

TEST(GgufBadFile, TensorOffsetOverflows) {
  const std::string p =
      with_tensors({{"x", {4}, kF32, ~0ull - 31}}, 16).save("offset_overflow.gguf");
  EXPECT_OPEN_FAILS(p, "tensor 'x' extends past end of file");
}

TEST(GgufBadFile, HugeDimension) {
  const std::string p = with_tensors({{"x", {1ull << 63}, kF32, 0}}, 16).save("dim_huge.gguf");
  EXPECT_OPEN_FAILS(p, "tensor 'x' has absurd dimension 0 = 9223372036854775808");
}

TEST(GgufBadFile, ZeroDimension) {
  const std::string p = with_tensors({{"x", {4, 0}, kF32, 0}}, 16).save("dim_zero.gguf");
  EXPECT_OPEN_FAILS(p, "tensor 'x' has absurd dimension 1 = 0");
}

TEST(GgufBadFile, DimensionProductOverflows) {
  const std::string p =
      with_tensors({{"x", {1ull << 32, 1ull << 32}, kF32, 0}}, 16).save("dim_overflow.gguf");
  EXPECT_OPEN_FAILS(p, "tensor 'x' has absurd dimensions: the element count overflows");
}

TEST(GgufBadFile, ByteSizeOverflows) {
  // 2^62 elements fit int64, 2^62 * 4 bytes does not fit uint64.
  const std::string p =
      with_tensors({{"x", {1ull << 31, 1ull << 31}, kF32, 0}}, 16).save("size_overflow.gguf");
  EXPECT_OPEN_FAILS(p, "tensor 'x' has absurd dimensions: its size overflows");
}

TEST(GgufBadFile, FiveDimensions) {
  const std::string p = with_tensors({{"x", {1, 1, 1, 1, 1}, kF32, 0}}, 32).save("ndims5.gguf");
  EXPECT_OPEN_FAILS(p, "tensor 'x' has 5 dimensions (expected 1 to 4)");
}

TEST(GgufBadFile, ZeroDimensions) {
  const std::string p = with_tensors({{"x", {}, kF32, 0}}, 32).save("ndims0.gguf");
  EXPECT_OPEN_FAILS(p, "tensor 'x' has 0 dimensions");
}

TEST(GgufBadFile, UnknownTensorType) {
  const std::string p = with_tensors({{"x", {4}, 99, 0}}, 32).save("ttype.gguf");
  EXPECT_OPEN_FAILS(p, "tensor 'x' has unknown type 99");
}

TEST(GgufBadFile, QuantisedRowNotMultipleOfBlock) {
  const std::string p = with_tensors({{"x", {16, 2}, kQ8_0, 0}}, 64).save("qblock.gguf");
  EXPECT_OPEN_FAILS(p, "tensor 'x' has ne0 16, not a multiple of the block size 32 of q8_0");
}

TEST(GgufBadFile, UnknownMetadataValueType) {
  Raw r;
  r.header(0, 1).str("general.weird").u32(13).u32(0);
  EXPECT_OPEN_FAILS(r.save("vtype.gguf"), "metadata 'general.weird' has unknown value type 13");
}

TEST(GgufBadFile, UnknownArrayElementType) {
  Raw r;
  r.header(0, 1).key("arr", ValueType::Array).u32(77).u64(0);
  EXPECT_OPEN_FAILS(r.save("etype.gguf"), "metadata 'arr' has unknown value type 77");
}

TEST(GgufBadFile, InvalidBool) {
  Raw r;
  r.header(0, 1).key("flag", ValueType::Bool).u8(2);
  EXPECT_OPEN_FAILS(r.save("bool.gguf"), "metadata 'flag' value is an invalid bool 2");
}

TEST(GgufBadFile, ArraysNestedTooDeep) {
  Raw r;
  r.header(0, 1).key("deep", ValueType::Array);
  for (int i = 0; i < 100; ++i) r.u32(uint32_t(ValueType::Array)).u64(1);
  r.u32(uint32_t(ValueType::UInt8)).u64(0);
  EXPECT_OPEN_FAILS(r.save("deep.gguf"), "has arrays nested deeper than 8");
}

TEST(GgufBadFile, MetadataOfWrongTypeViaGetters) {
  const std::string path = good_file("getters.gguf");
  const GgufFile f = GgufFile::open(path);
  expect_error(error_of([&] { f.get_uint("general.architecture"); }), path,
               "metadata 'general.architecture' is string, expected an integer");
  expect_error(error_of([&] { f.get_int("general.architecture"); }), path,
               "is string, expected an integer");
  expect_error(error_of([&] { f.get_string("llama.block_count"); }), path,
               "metadata 'llama.block_count' is uint32, expected string");
  expect_error(error_of([&] { f.get_float("llama.block_count"); }), path,
               "is uint32, expected a float");
  expect_error(error_of([&] { f.get_bool("llama.block_count"); }), path,
               "is uint32, expected bool");
  expect_error(error_of([&] { f.get_string_array("llama.block_count"); }), path,
               "is uint32, expected array of string");
  expect_error(error_of([&] { f.get_int_array("tokenizer.ggml.tokens"); }), path,
               "is array of string, expected array of integer");
  expect_error(error_of([&] { f.get_float_array("tokenizer.ggml.tokens"); }), path,
               "is array of string, expected array of float");
  // The _or getters fall back only when the key is absent.
  expect_error(error_of([&] { f.get_uint_or("general.architecture", 1); }), path,
               "is string, expected an integer");
  expect_error(error_of([&] { f.get_string_or("llama.block_count", "x"); }), path,
               "is uint32, expected string");
  expect_error(error_of([&] { f.get_float_or("general.architecture", 1); }), path,
               "expected a float");
  expect_error(error_of([&] { f.get_bool_or("general.architecture", true); }), path,
               "expected bool");
}

TEST(GgufBadFile, MissingMetadataViaGetter) {
  const std::string path = good_file("getters_missing.gguf");
  const GgufFile f = GgufFile::open(path);
  expect_error(error_of([&] { f.get_uint("llama.context_length"); }), path,
               "missing metadata 'llama.context_length'");
}

TEST(GgufBadFile, NegativeValueViaGetUint) {
  Raw r;
  r.header(0, 1).key("n", ValueType::Int32).put<int32_t>(-3);
  const std::string path = r.save("negative.gguf");
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.get_int("n"), -3);
  expect_error(error_of([&] { f.get_uint("n"); }), path,
               "metadata 'n' is -3, expected a non-negative integer");
}

TEST(GgufBadFile, KeyLengthPastEndOfFile) {
  Raw r;
  r.header(0, 1).u64(1ull << 40).zeros(20);
  EXPECT_OPEN_FAILS(r.save("keylen.gguf"),
                    "truncated: metadata key 0 (1099511627776-byte string) needs 1099511627776 "
                    "bytes at offset 32, file is 52 bytes");
}

TEST(GgufBadFile, StringValueLengthPastEndOfFile) {
  Raw r;
  r.header(0, 1).key("general.name", ValueType::String).u64(~0ull).zeros(20);
  EXPECT_OPEN_FAILS(r.save("strlen.gguf"),
                    "truncated: metadata 'general.name' value (18446744073709551615-byte string)");
}

TEST(GgufBadFile, TensorNameLengthPastEndOfFile) {
  Raw r;
  r.header(1, 0).u64(1000).zeros(30);
  EXPECT_OPEN_FAILS(r.save("namelen.gguf"), "truncated: tensor info 0 name (1000-byte string)");
}

TEST(GgufBadFile, HugeTensorCount) {
  EXPECT_OPEN_FAILS(Raw().header(1ull << 60, 0).zeros(100).save("tcount.gguf"),
                    "absurd tensor count 1152921504606846976 for a file of 124 bytes");
}

TEST(GgufBadFile, HugeMetadataCount) {
  EXPECT_OPEN_FAILS(Raw().header(0, ~0ull).zeros(100).save("kvcount.gguf"),
                    "absurd metadata count 18446744073709551615");
}

TEST(GgufBadFile, CountsTogetherExceedTheFile) {
  // Each count alone fits in the 130 bytes left; both together cannot.
  EXPECT_OPEN_FAILS(Raw().header(5, 5).zeros(130).save("counts.gguf"), "absurd tensor count 5");
}

TEST(GgufBadFile, HugeArrayCount) {
  Raw r;
  r.header(0, 1).key("arr", ValueType::Array).u32(uint32_t(ValueType::UInt32)).u64(1ull << 61);
  r.zeros(64);
  EXPECT_OPEN_FAILS(r.save("arrcount.gguf"), "metadata 'arr' has absurd array count");
}

TEST(GgufBadFile, HugeStringArrayCount) {
  Raw r;
  r.header(0, 1).key("arr", ValueType::Array).u32(uint32_t(ValueType::String)).u64(100);
  r.zeros(64);
  EXPECT_OPEN_FAILS(r.save("strarrcount.gguf"), "metadata 'arr' has absurd array count 100");
}

TEST(GgufBadFile, AlignmentZero) {
  EXPECT_OPEN_FAILS(Raw().header(0, 1).kv_u32("general.alignment", 0).save("align0.gguf"),
                    "metadata 'general.alignment' is 0, expected a non-zero power of two");
}

TEST(GgufBadFile, AlignmentThree) {
  EXPECT_OPEN_FAILS(Raw().header(0, 1).kv_u32("general.alignment", 3).save("align3.gguf"),
                    "metadata 'general.alignment' is 3, expected a non-zero power of two");
}

TEST(GgufBadFile, AlignmentOfWrongType) {
  EXPECT_OPEN_FAILS(Raw().header(0, 1).kv_str("general.alignment", "32").save("align_str.gguf"),
                    "metadata 'general.alignment' is string, expected uint32");
}

TEST(GgufBadFile, MisalignedTensorOffset) {
  const std::string p =
      with_tensors({{"x", {4}, kF32, 0}, {"y", {4}, kF32, 16}}, 64).save("misaligned.gguf");
  EXPECT_OPEN_FAILS(p, "tensor 'y' offset 16 is not a multiple of the alignment 32");
}

TEST(GgufBadFile, OffsetMisalignedForCustomAlignment) {
  Raw r;
  r.header(1, 1).kv_u32("general.alignment", 64).tensor_info("x", {4}, kF32, 32).pad(64);
  r.zeros(128);
  EXPECT_OPEN_FAILS(r.save("misaligned64.gguf"),
                    "tensor 'x' offset 32 is not a multiple of the alignment 64");
}

TEST(GgufBadFile, DuplicateTensorName) {
  const std::string p =
      with_tensors({{"x", {4}, kF32, 0}, {"x", {4}, kF32, 32}}, 64).save("dup_tensor.gguf");
  EXPECT_OPEN_FAILS(p, "duplicate tensor 'x'");
}

TEST(GgufBadFile, DuplicateMetadataKey) {
  Raw r;
  r.header(0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2);
  EXPECT_OPEN_FAILS(r.save("dup_key.gguf"), "duplicate metadata 'a.b'");
}

TEST(GgufBadFile, EmptyTensorName) {
  EXPECT_OPEN_FAILS(with_tensors({{"", {4}, kF32, 0}}, 32).save("empty_name.gguf"),
                    "tensor 0 has an empty name");
}

TEST(GgufBadFile, OverlappingTensors) {
  // y (offset 32) starts inside x (offset 0, 64 bytes); listed out of order to exercise sorting.
  const std::string p =
      with_tensors({{"y", {8}, kF32, 32}, {"x", {16}, kF32, 0}}, 128).save("overlap.gguf");
  EXPECT_OPEN_FAILS(p, "tensors 'x' and 'y' overlap");
}

TEST(GgufBadFile, ControlCharactersInNamesAreEscaped) {
  const std::string p = with_tensors({{"a\nb", {4}, 99, 0}}, 32).save("ctrl_name.gguf");
  EXPECT_OPEN_FAILS(p, "tensor 'a\\x0ab' has unknown type 99");
}

TEST(GgufBadFile, MissingTensorViaLookup) {
  const std::string path = good_file("missing_tensor.gguf");
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  expect_error(error_of([&] { f.tensor("output.weight"); }), path,
               "missing tensor 'output.weight'");
}

}  // namespace
}  // namespace shrike::gguf
