// Helpers shared by the cross-cutting test suites.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/host_tensor.h"

namespace hf2pte::test {

/// Absolute path of a file under the repository root.
std::string repo_path(const std::string& relative);
/// A fresh empty directory under the build tree, unique per test.
std::string temp_dir(const std::string& name);
/// Reads a .npy and fails the current test if it cannot.
HostTensor load_npy(const std::string& path);
std::vector<float> as_floats(const HostTensor& t);
std::vector<int64_t> as_longs(const HostTensor& t);
/// max |a - b| (infinity when sizes differ).
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);
/// "1.2e-06" for test properties (std::to_string's fixed 6 decimals would print 0.000001).
std::string diff_text(double d);

/// What one CLI run left: exit code (-1 when a signal ended it), stderr, stdout.
struct CliResult {
  int exit_code = -1;
  std::string err;
  std::string out;
};
/// Runs `cli args` through the shell, capturing stdout and stderr in files under `dir`.
CliResult run_cli(const std::string& cli, const std::string& args, const std::string& dir);

/// A float32 checkpoint tensor held in memory, for tests that derive checkpoints.
struct F32Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
using F32Tensors = std::map<std::string, F32Tensor>;
/// Every tensor of the checkpoint folder `dir` (all must be F32; fails the test otherwise).
F32Tensors read_f32_tensors(const std::string& dir);
/// Writes `tensors` as dir/model.safetensors and `config_json` as dir/config.json.
void write_f32_checkpoint(const std::string& dir, const F32Tensors& tensors, const std::string& config_json);

}  // namespace hf2pte::test
