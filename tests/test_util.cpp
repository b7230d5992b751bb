#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "checkpoint/npy.h"

namespace hf2pte::test {

std::string repo_path(const std::string& relative) { return std::string(HF2PTE_SOURCE_DIR) + "/" + relative; }

std::string temp_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
  for (auto& c : test) if (c == '/') c = '_';
  auto dir = std::filesystem::path(HF2PTE_BINARY_DIR) / "test_tmp" / test / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

HostTensor load_npy(const std::string& path) {
  auto t = read_npy(path);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? *t : HostTensor{};
}

std::vector<float> as_floats(const HostTensor& t) {
  std::vector<float> v(size_t(t.numel()));
  if (t.dtype == ScalarType::kFloat && t.bytes.size() == v.size() * 4) std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

std::vector<int64_t> as_longs(const HostTensor& t) {
  std::vector<int64_t> v(size_t(t.numel()));
  if (t.dtype == ScalarType::kLong && t.bytes.size() == v.size() * 8) std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = std::fabs(double(a[i]) - double(b[i]));
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  }
  return m;
}

}  // namespace hf2pte::test
