// Upstream-written programs (ExecuTorch 1.3.1, tests/data/conformance) run in
// our runtime with the real portable kernels, with the outputs the upstream
// runtime printed for all-ones inputs (tests/data/conformance/README.md).
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/portable/kernels.h"
#include "runtime/program.h"
#include "test_util.h"

namespace hf2pte {
namespace {

std::unique_ptr<rt::Method> load(const std::string& file, const std::string& method) {
  auto program = rt::Program::load(test::repo_path("tests/data/conformance/" + file));
  EXPECT_TRUE(program.is_ok()) << program.status().message();
  if (!program.is_ok()) return nullptr;
  auto m = (*program)->load_method(method, portable_registry());
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.is_ok() ? std::move(*m) : nullptr;
}

/// Fills every tensor input with ones at its planned shape, as the README's runs did.
void set_ones(rt::Method& m) {
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    auto meta = m.input_meta(i);
    HostTensor t{meta.dtype, meta.sizes, {}};
    t.bytes.resize(size_t(t.numel()) * element_size(meta.dtype));
    for (int64_t k = 0; k < t.numel(); ++k) {
      if (meta.dtype == ScalarType::kFloat) t.data<float>()[k] = 1.0f;
      if (meta.dtype == ScalarType::kLong) t.data<int64_t>()[k] = 1;
    }
    ASSERT_TRUE(m.set_input(i, t).is_ok());
  }
}

TEST(Conformance, DtypesAddsInt64AndFloat) {
  auto m = load("dtypes.pte", "forward");
  ASSERT_NE(m, nullptr);
  set_ones(*m);
  ASSERT_TRUE(m->execute().is_ok());
  EXPECT_EQ(test::as_longs(*m->output_tensor(0)), std::vector<int64_t>{2});
  EXPECT_EQ(test::as_floats(*m->output_tensor(1)), std::vector<float>{2.0f});
}

TEST(Conformance, MultiHasTwoMethods) {
  for (const char* name : {"forward", "double"}) {
    auto m = load("multi.pte", name);
    ASSERT_NE(m, nullptr);
    set_ones(*m);
    auto st = m->execute();
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(test::as_floats(*m->output_tensor(0)), (std::vector<float>{2.0f, 2.0f})) << name;
  }
}

TEST(Conformance, ConstMethods) {
  auto fwd = load("const_methods.pte", "forward");
  ASSERT_NE(fwd, nullptr);
  set_ones(*fwd);
  ASSERT_TRUE(fwd->execute().is_ok());
  EXPECT_EQ(test::as_floats(*fwd->output_tensor(0)), (std::vector<float>{2.0f, 2.0f, 2.0f}));
  auto scalar = load("const_methods.pte", "get_scalar");
  ASSERT_NE(scalar, nullptr);
  ASSERT_TRUE(scalar->execute().is_ok());
  EXPECT_EQ(scalar->output(0).i, 128);
  auto dbl = load("const_methods.pte", "get_double");
  ASSERT_NE(dbl, nullptr);
  ASSERT_TRUE(dbl->execute().is_ok());
  EXPECT_EQ(dbl->output(0).d, 2.5);
  auto b = load("const_methods.pte", "get_bool");
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->execute().is_ok());
  EXPECT_TRUE(b->output(0).is_bool() && b->output(0).i == 1);
  auto t = load("const_methods.pte", "get_tensor");
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->execute().is_ok());
  EXPECT_EQ(test::as_longs(*t->output_tensor(0)), (std::vector<int64_t>{1, 2, 3}));
}

TEST(Conformance, LstmNamesTheMissingOperator) {
  auto program = rt::Program::load(test::repo_path("tests/data/conformance/lstm/lstm.pte"));
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  auto m = (*program)->load_method("forward", portable_registry());
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("etnp::lstm.out"), std::string::npos) << m.status().message();
}

}  // namespace
}  // namespace hf2pte
