// Helpers shared by the cross-cutting test suites.
#pragma once

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

}  // namespace hf2pte::test
