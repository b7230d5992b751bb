#include "checkpoint/safetensors.h"

#include <gtest/gtest.h>

#include <random>

#include "test_util.h"

namespace hf2pte {
namespace {

using testing::build_safetensors;
using testing::f32_bytes;
using testing::safetensors_bytes;
using testing::TempDir;
using testing::write_bytes;

// Writes `bytes` to a temp file and opens it.
class SafetensorsTest : public ::testing::Test {
 protected:
  Result<SafetensorsFile> open_bytes(const std::vector<uint8_t>& bytes) {
    path_ = dir_.file("t.safetensors");
    write_bytes(path_, bytes);
    return SafetensorsFile::open(path_);
  }
  // Opens a file whose header is `header` and data section `data_size` zero bytes.
  Result<SafetensorsFile> open_header(const std::string& header, size_t data_size) {
    return open_bytes(safetensors_bytes(header, std::vector<uint8_t>(data_size, 0)));
  }
  void expect_invalid(const Result<SafetensorsFile>& r, const std::string& fragment) {
    ASSERT_FALSE(r.is_ok()) << "expected an error containing: " << fragment;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidInput) << r.status().message();
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(path_), std::string::npos) << r.status().message();
  }

  TempDir dir_;
  std::string path_;
};

TEST_F(SafetensorsTest, GoodFileGivesZeroCopyViewsInFileOrder) {
  std::vector<uint8_t> ids = {7, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0};
  // "b" is written first, so it comes first in the data section even though
  // the JSON object (and nlohmann) order keys alphabetically.
  auto bytes = build_safetensors({{"b", "F32", {2, 3}, f32_bytes({1, 2, 3, 4, 5, 6})}, {"a", "I64", {2}, ids}},
                                 {{"format", "pt"}});
  auto r = open_bytes(bytes);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const SafetensorsFile& f = *r;
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensors()[0].name, "b");
  EXPECT_EQ(f.tensors()[1].name, "a");
  EXPECT_EQ(f.metadata().at("format"), "pt");

  const TensorRef* b = f.find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, ScalarType::kFloat);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b->numel(), 6);
  EXPECT_EQ(b->file, path_);
  ASSERT_EQ(b->bytes.size(), 24u);
  float v[6];
  std::memcpy(v, b->bytes.data(), 24);
  EXPECT_EQ(v[5], 6.0f);

  const TensorRef* a = f.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, ScalarType::kLong);
  EXPECT_EQ(a->bytes[8], 9);
  EXPECT_EQ(f.find("c"), nullptr);
}

TEST_F(SafetensorsTest, TensorRefOutlivesTheFile) {
  TensorRef kept;
  {
    auto r = open_bytes(build_safetensors({{"w", "F32", {1}, f32_bytes({4.5f})}}));
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    kept = r->tensors()[0];
  }
  float v;
  std::memcpy(&v, kept.bytes.data(), 4);
  EXPECT_EQ(v, 4.5f);
}

TEST_F(SafetensorsTest, AcceptsEveryListedDtype) {
  const std::pair<const char*, ScalarType> cases[] = {
      {"F32", ScalarType::kFloat}, {"F16", ScalarType::kHalf}, {"BF16", ScalarType::kBFloat16},
      {"F64", ScalarType::kDouble}, {"I64", ScalarType::kLong}, {"I32", ScalarType::kInt},
      {"I16", ScalarType::kShort}, {"I8", ScalarType::kChar}, {"U8", ScalarType::kByte},
      {"BOOL", ScalarType::kBool}};
  for (const auto& [name, type] : cases) {
    size_t n = element_size(type) * 3;
    auto r = open_bytes(build_safetensors({{"t", name, {3}, std::vector<uint8_t>(n, 0)}}));
    ASSERT_TRUE(r.is_ok()) << name << ": " << r.status().message();
    EXPECT_EQ(r->tensors()[0].dtype, type) << name;
    EXPECT_EQ(safetensors_dtype_name(type), name);
  }
}

TEST_F(SafetensorsTest, AcceptsScalarsEmptyTensorsPaddedHeadersAndNoTensors) {
  // A scalar has shape [] and one element; an empty tensor occupies no bytes.
  auto r = open_header(R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                       R"("e":{"dtype":"F32","shape":[0,5],"data_offsets":[4,4]}}    )",
                       4);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->find("s")->numel(), 1);
  EXPECT_EQ(r->find("e")->numel(), 0);
  EXPECT_TRUE(r->find("e")->bytes.empty());

  auto empty = open_header(R"({"__metadata__":{"format":"pt"}})", 0);
  ASSERT_TRUE(empty.is_ok()) << empty.status().message();
  EXPECT_TRUE(empty->tensors().empty());
}

TEST_F(SafetensorsTest, RejectsTruncatedFiles) {
  expect_invalid(open_bytes({1, 0, 0}), "expected at least 8 bytes, got 3");
  // Cut the real fixture in the middle of its data: the tensors no longer fit.
  auto full = testing::read_bytes(testing::fixture_dir("llama-mha") + "/model.safetensors");
  ASSERT_GT(full.size(), 1000u);
  full.resize(full.size() - 100);
  expect_invalid(open_bytes(full), "data_offsets past the end of the file");
}

TEST_F(SafetensorsTest, RejectsHeaderLongerThanFile) {
  expect_invalid(open_bytes(safetensors_bytes("{}", {}, 1000)),
                 "header longer than the file (truncated?); expected at most 2 bytes, got 1000");
  expect_invalid(open_bytes(safetensors_bytes("{}", {}, uint64_t(1) << 40)), "header too large");
}

TEST_F(SafetensorsTest, RejectsInvalidJson) {
  expect_invalid(open_header(R"({"a": {"dtype": "F32",)", 0), "invalid JSON at byte");
  expect_invalid(open_header("[1, 2]", 0), "not a JSON object; expected object, got array");
  expect_invalid(open_header("{} {}", 0), "invalid JSON");
  expect_invalid(open_header(std::string("{\"a\xff\": 1}"), 0), "invalid JSON");
  expect_invalid(open_header(R"({"a": {"dtype": "F32", "shape": [[[[1]]]]}})", 0), "nesting deeper than 4");
}

TEST_F(SafetensorsTest, RejectsOverlappingOffsets) {
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                             12),
                 "overlapping data_offsets; expected begin >= 8 (end of tensor a), got 4");
  // The same range twice is an overlap too.
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                             4),
                 "overlapping data_offsets");
}

TEST_F(SafetensorsTest, RejectsGapsAndTrailingBytes) {
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
                 "gap in the data section; expected tensor to start at byte 0, got 4");
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12),
                 "bytes after the last tensor; expected a data section of 4 bytes, got 12");
}

TEST_F(SafetensorsTest, RejectsSizeMismatchWithExactMessage) {
  auto r = open_header(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(),
            "tensor byte size does not match shape and dtype; expected 24 bytes ([2,3] x F32), got 20 (" + path_ +
                ", tensor a)");
}

TEST_F(SafetensorsTest, RejectsDuplicateNames) {
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                             8),
                 "duplicate key 'a'");
}

TEST_F(SafetensorsTest, RejectsUnknownDtype) {
  expect_invalid(open_header(R"({"a":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", 4),
                 "unsupported dtype; expected one of F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL, got "
                 "'F8_E4M3' (");
  expect_invalid(open_header(R"({"a":{"dtype":32,"shape":[4],"data_offsets":[0,4]}})", 4),
                 "bad 'dtype'; expected string, got integer");
}

TEST_F(SafetensorsTest, RejectsBadEntries) {
  expect_invalid(open_header(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4), "lacks 'dtype'");
  expect_invalid(open_header(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", 4), "lacks 'shape'");
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":[1]}})", 4), "lacks 'data_offsets'");
  expect_invalid(open_header(R"({"a":[1,2]})", 4), "tensor entry is not an object");
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
                 "bad 'shape'; expected non-negative integers, got -1");
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
                 "bad 'shape'; expected non-negative integers, got 1.5");
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", 4),
                 "bad 'shape'; expected array, got string");
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4),
                 "expected begin <= end, got [4, 0]");
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4),
                 "bad 'data_offsets'; expected [begin, end]");
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", 4),
                 "data_offsets past the end of the file; expected end <= 4, got 8");
  expect_invalid(open_header(R"({"__metadata__":{"format":1}})", 0),
                 "bad __metadata__ value for 'format'; expected string, got integer");
  expect_invalid(open_header(R"({"__metadata__":[]})", 0), "bad __metadata__; expected object, got array");
}

TEST_F(SafetensorsTest, RejectsOverflowingShapes) {
  // 2^62 * 2^62 elements overflow uint64; 2^62 F32 elements overflow the
  // byte count (and would wrap to 0); 2^40 elements do not match the range.
  expect_invalid(
      open_header(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,4]}})",
                  4),
      "tensor shape too large; expected a byte size below 2^64");
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0),
                 "tensor shape too large");
  expect_invalid(open_header(R"({"a":{"dtype":"F32","shape":[1099511627776],"data_offsets":[0,4]}})", 4),
                 "expected 4398046511104 bytes ([1099511627776] x F32), got 4");
  // ... but a zero anywhere makes the tensor empty, whatever the other dims.
  auto r = open_header(R"({"a":{"dtype":"F32","shape":[4611686018427387904,0,4611686018427387904],)"
                       R"("data_offsets":[0,0]}})",
                       0);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
}

// Cheap robustness check: every truncation and random header corruption of a
// real file must give a clean error (or a valid file), never a crash. The
// sanitizer build turns out-of-bounds reads here into failures.
TEST_F(SafetensorsTest, MutatedFixturesNeverCrash) {
  auto good = testing::build_safetensors(
      {{"x", "F32", {2, 2}, f32_bytes({1, 2, 3, 4})}, {"y", "BF16", {3}, std::vector<uint8_t>(6, 1)}},
      {{"format", "pt"}});
  for (size_t len = 0; len < good.size(); ++len) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + long(len));
    EXPECT_FALSE(open_bytes(cut).is_ok()) << len;
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 500; ++i) {
    auto bad = good;
    size_t pos = rng() % bad.size();
    bad[pos] = uint8_t(rng());
    (void)open_bytes(bad);  // any result is fine; crashing is not
  }
}

}  // namespace
}  // namespace hf2pte
