// The parameter of the suites that run every listed fixture on each backend
// (no_kv_cache_test, custom_sdpa_test, last_logits_test): the fixture folder's
// name and the backend, the names the cases are reported under, and the
// XNNPACK delegate registered before each case.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "backends/xnnpack/runtime/xnnpack_backend.h"
#include "export/export_config.h"
#include "test_util.h"

namespace hf2pte::test {

using FixtureBackend = std::tuple<std::string, exp::Backend>;

class FixtureBackendTest : public ::testing::TestWithParam<FixtureBackend> {
 protected:
  void SetUp() override { ASSERT_TRUE(xnn::register_xnnpack_backend().is_ok()); }
  std::string name() const { return std::get<0>(GetParam()); }
  exp::Backend backend() const { return std::get<1>(GetParam()); }
  std::string dir() const { return repo_path("tests/data/fixtures/" + name()); }
  std::string tag() const { return name() + "-" + exp::backend_name(backend()); }
};

/// "llama-gqa" on xnnpack -> "llama_gqa_xnnpack" (gtest names take no '-').
inline std::string fixture_backend_name(const ::testing::TestParamInfo<FixtureBackend>& info) {
  std::string n = std::get<0>(info.param) + "_" + exp::backend_name(std::get<1>(info.param));
  for (char& c : n) if (c == '-') c = '_';
  return n;
}

}  // namespace hf2pte::test
