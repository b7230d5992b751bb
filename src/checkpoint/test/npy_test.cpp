#include "checkpoint/npy.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_util.h"

namespace hf2pte {
namespace {

using testing::fixture_dir;
using testing::read_bytes;
using testing::TempDir;

std::vector<uint8_t> npy_with_header(const std::string& header, const std::vector<uint8_t>& data, int major = 1) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(major), 0};
  size_t n = header.size();
  int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) out.push_back(uint8_t((n >> (8 * i)) & 0xFF));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

TEST(Npy, ReadsFixtures) {
  auto ids = read_npy(fixture_dir("llama-mha") + "/input_ids.npy");
  ASSERT_TRUE(ids.is_ok()) << ids.status().message();
  EXPECT_EQ(ids->dtype, ScalarType::kLong);
  EXPECT_EQ(ids->sizes, std::vector<int64_t>{10});
  EXPECT_EQ(ids->data<int64_t>()[0], 62);  // first id, as the file's bytes say

  for (const auto& [name, vocab] : std::vector<std::pair<std::string, int64_t>>{
           {"llama-mha", 320}, {"llama-gqa", 512}, {"qwen2", 448}, {"phi3", 320}}) {
    auto logits = read_npy(fixture_dir(name) + "/logits.npy");
    ASSERT_TRUE(logits.is_ok()) << logits.status().message();
    EXPECT_EQ(logits->dtype, ScalarType::kFloat);
    EXPECT_EQ(logits->sizes, (std::vector<int64_t>{10, vocab})) << name;
    auto greedy = read_npy(fixture_dir(name) + "/greedy.npy");
    ASSERT_TRUE(greedy.is_ok()) << greedy.status().message();
    EXPECT_EQ(greedy->sizes, std::vector<int64_t>{12});
  }
}

TEST(Npy, EncodesExactlyAsNumpyDid) {
  // Re-encoding what numpy wrote gives the same bytes, header padding included.
  for (const char* file : {"input_ids.npy", "logits.npy", "greedy.npy", "greedy_step_logits.npy"}) {
    std::string path = fixture_dir("llama-gqa") + "/" + file;
    auto t = read_npy(path);
    ASSERT_TRUE(t.is_ok()) << t.status().message();
    auto bytes = encode_npy(*t);
    ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
    EXPECT_EQ(*bytes, read_bytes(path)) << file;
  }
}

TEST(Npy, RoundTripsEveryDtype) {
  TempDir dir;
  std::vector<HostTensor> cases = {
      HostTensor::from<float>(ScalarType::kFloat, {2, 3}, {1, -2, 3.5f, 0, 1e30f, -0.0f}),
      HostTensor::from<double>(ScalarType::kDouble, {2}, {1e-300, 2.5}),
      HostTensor::from<int64_t>(ScalarType::kLong, {3}, {-1, INT64_MAX, 0}),
      HostTensor::from<int32_t>(ScalarType::kInt, {1, 1, 2}, {7, -7}),
      HostTensor::from<uint8_t>(ScalarType::kBool, {4}, {1, 0, 0, 1}),
      HostTensor::from<uint16_t>(ScalarType::kHalf, {1}, {0x3C00}),
      HostTensor::from<int8_t>(ScalarType::kChar, {2}, {-5, 5}),
      HostTensor::from<uint8_t>(ScalarType::kByte, {2}, {200, 3}),
      HostTensor::from<int16_t>(ScalarType::kShort, {2}, {-300, 300}),
      HostTensor::from<float>(ScalarType::kFloat, {}, {42}),      // 0-d
      HostTensor::from<float>(ScalarType::kFloat, {0, 4}, {}),    // empty
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string path = dir.file("t" + std::to_string(i) + ".npy");
    ASSERT_TRUE(write_npy(path, cases[i]).is_ok()) << i;
    auto back = read_npy(path);
    ASSERT_TRUE(back.is_ok()) << i << ": " << back.status().message();
    EXPECT_EQ(back->dtype, cases[i].dtype) << i;
    EXPECT_EQ(back->sizes, cases[i].sizes) << i;
    EXPECT_EQ(back->bytes, cases[i].bytes) << i;
    // numpy's layout: 64-byte aligned data, header ending in '\n'.
    auto raw = read_bytes(path);
    size_t header_end = raw.size() - cases[i].bytes.size();
    EXPECT_EQ(header_end % 64, 0u) << i;
    EXPECT_EQ(raw[header_end - 1], '\n') << i;
  }
  // Only the outputs are left: no temporary files.
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, cases.size());
}

TEST(Npy, HeaderDetails) {
  auto t = HostTensor::from<float>(ScalarType::kFloat, {10, 320}, std::vector<float>(3200, 0));
  auto bytes = encode_npy(t);
  ASSERT_TRUE(bytes.is_ok());
  std::string header(bytes->begin() + 10, bytes->begin() + 128);
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 320), }";
  EXPECT_EQ(header.substr(0, dict.size()), dict);
  // numpy's growth room (21 - 2 digits of shape[0]), then padding, then '\n'.
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(header.find_first_not_of(' ', dict.size()), header.size() - 1);
  EXPECT_EQ((*bytes)[6], 1);  // version 1.0
  auto bool_bytes = *encode_npy(HostTensor::from<uint8_t>(ScalarType::kBool, {1}, {1}));
  EXPECT_NE(std::string(bool_bytes.begin(), bool_bytes.end()).find("'descr': '|b1'"), std::string::npos);

  EXPECT_EQ(encode_npy(HostTensor{ScalarType::kBFloat16, {1}, {0, 0}}).status().code(), ErrorCode::kNotSupported);
  EXPECT_EQ(encode_npy(HostTensor{ScalarType::kFloat, {2}, {0, 0, 0}}).status().code(), ErrorCode::kInvalidArgument);
}

TEST(Npy, ParsesOtherHeaderSpellings) {
  std::vector<uint8_t> data(16, 0);
  data[0] = 1;
  // Version 2.0, double quotes, key order shuffled, no trailing comma, Python 2 'L'.
  auto v2 = parse_npy(npy_with_header("{\"shape\": (2L, 1), 'descr': '<i8', 'fortran_order': False}\n", data, 2),
                      "x.npy");
  ASSERT_TRUE(v2.is_ok()) << v2.status().message();
  EXPECT_EQ(v2->sizes, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(v2->data<int64_t>()[0], 1);
  auto native = parse_npy(npy_with_header("{'descr': '=f4', 'fortran_order': False, 'shape': (4,), }", data),
                          "x.npy");
  EXPECT_TRUE(native.is_ok()) << native.status().message();
}

TEST(Npy, RejectsBadFiles) {
  auto err = [](const std::vector<uint8_t>& bytes) {
    auto r = parse_npy(bytes, "x.npy");
    return r.is_ok() ? Status::ok() : r.status();
  };
  const std::string good_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  std::vector<uint8_t> data(8, 0);
  ASSERT_TRUE(err(npy_with_header(good_header, data)).is_ok());

  EXPECT_EQ(err({1, 2, 3}).code(), ErrorCode::kInvalidInput);
  auto bad_version = npy_with_header(good_header, data);
  bad_version[6] = 9;
  EXPECT_EQ(err(bad_version).code(), ErrorCode::kNotSupported);

  auto fortran = err(npy_with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", data));
  EXPECT_EQ(fortran.code(), ErrorCode::kNotSupported);
  EXPECT_EQ(fortran.message(),
            "Fortran-order .npy arrays are not supported; expected fortran_order False, got True (x.npy)");
  EXPECT_EQ(err(npy_with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", data)).code(),
            ErrorCode::kNotSupported);
  EXPECT_EQ(err(npy_with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", data)).code(),
            ErrorCode::kNotSupported);

  auto short_data = err(npy_with_header(good_header, std::vector<uint8_t>(7, 0)));
  EXPECT_EQ(short_data.code(), ErrorCode::kInvalidInput);
  EXPECT_NE(short_data.message().find("expected 8 bytes for shape (2,) of '<f4', got 7"), std::string::npos)
      << short_data.message();
  EXPECT_EQ(err(npy_with_header(good_header, std::vector<uint8_t>(12, 0))).code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(err(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
                                data))
                .code(),
            ErrorCode::kInvalidInput);

  for (const char* h : {"{'descr': '<f4', 'shape': (2,), }",                                   // key missing
                        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",      // extra key
                        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",  // repeated
                        "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }",
                        "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }",
                        "{'descr': '<f4', 'fortran_order': False, 'shape': [2], }",
                        "{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }",
                        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x",
                        "'descr'"}) {
    auto st = err(npy_with_header(h, data));
    EXPECT_EQ(st.code(), ErrorCode::kInvalidInput) << h << " -> " << st.message();
  }
  auto header_too_long = npy_with_header(good_header, data);
  header_too_long[8] = 0xFF;
  EXPECT_EQ(err(header_too_long).code(), ErrorCode::kInvalidInput);

  auto bad_bool = err(npy_with_header("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", {0, 2}));
  EXPECT_NE(bad_bool.message().find("bad bool in .npy data; expected 0 or 1, got 2 at element 1"),
            std::string::npos);
  EXPECT_EQ(read_npy("/nonexistent/x.npy").status().code(), ErrorCode::kNotFound);
}

TEST(Npy, WriteFailureLeavesNothing) {
  TempDir dir;
  auto t = HostTensor::from<float>(ScalarType::kFloat, {1}, {1});
  EXPECT_EQ(write_npy(dir.file("missing/x.npy"), t).code(), ErrorCode::kIoError);
  // Overwriting an existing file replaces it whole.
  ASSERT_TRUE(write_npy(dir.file("x.npy"), t).is_ok());
  ASSERT_TRUE(write_npy(dir.file("x.npy"), HostTensor::from<int64_t>(ScalarType::kLong, {2}, {1, 2})).is_ok());
  EXPECT_EQ(read_npy(dir.file("x.npy"))->dtype, ScalarType::kLong);
  // Writing onto a folder fails at the rename; the temporary is removed.
  std::filesystem::create_directory(dir.file("d.npy"));
  std::filesystem::create_directory(dir.file("d.npy/keep"));
  EXPECT_EQ(write_npy(dir.file("d.npy"), t).code(), ErrorCode::kIoError);
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 2u);  // x.npy and d.npy
}

}  // namespace
}  // namespace hf2pte
