#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/npy.h"
#include "checkpoint/test/test_util.h"

namespace hf2pte::test {

// HF2PTE_TEST_SOURCE_DIR / HF2PTE_TEST_BINARY_DIR (environment) replace the
// build's paths when the binaries run from another checkout, as the prebuilt
// bundle of scripts/device-check.sh does.
namespace {
std::string dir_from_env(const char* name, const char* built_in) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : built_in;
}
}  // namespace

std::string repo_path(const std::string& relative) {
  return dir_from_env("HF2PTE_TEST_SOURCE_DIR", HF2PTE_SOURCE_DIR) + "/" + relative;
}

std::string temp_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
  for (auto& c : test) if (c == '/') c = '_';
  auto dir = std::filesystem::path(dir_from_env("HF2PTE_TEST_BINARY_DIR", HF2PTE_BINARY_DIR)) / "test_tmp" / test / name;
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

std::string diff_text(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", d);
  return buf;
}

namespace {
std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

CliResult run_cli(const std::string& cli, const std::string& args, const std::string& dir) {
  const std::string out_path = dir + "/stdout.txt", err_path = dir + "/stderr.txt";
  const int rc = std::system((cli + " " + args + " >" + out_path + " 2>" + err_path).c_str());
  CliResult r;
  r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.err = slurp(err_path);
  r.out = slurp(out_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return r;
}

F32Tensors read_f32_tensors(const std::string& dir) {
  F32Tensors out;
  auto ck = Checkpoint::open(dir);
  EXPECT_TRUE(ck.is_ok()) << ck.status().message();
  if (!ck.is_ok()) return out;
  for (const auto& n : ck->tensor_names()) {
    auto t = ck->tensor(n);
    EXPECT_TRUE(t.is_ok()) << n;
    if (!t.is_ok()) continue;
    EXPECT_EQ((*t)->dtype, ScalarType::kFloat) << n;
    F32Tensor x{(*t)->shape, std::vector<float>((*t)->bytes.size() / sizeof(float))};
    std::memcpy(x.data.data(), (*t)->bytes.data(), x.data.size() * sizeof(float));
    out[n] = std::move(x);
  }
  return out;
}

void write_f32_checkpoint(const std::string& dir, const F32Tensors& tensors, const std::string& config_json) {
  std::vector<testing::TensorSpec> specs;
  for (const auto& [name, t] : tensors) specs.push_back({name, "F32", t.shape, testing::f32_bytes(t.data)});
  testing::write_bytes(dir + "/model.safetensors", testing::build_safetensors(specs));
  std::ofstream(dir + "/config.json") << config_json;
}

}  // namespace hf2pte::test
