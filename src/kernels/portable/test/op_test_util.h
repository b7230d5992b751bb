// Op tests written once for every kernel library (docs/STYLE.md rule 8, like
// ExecuTorch's kernels/test): a test names a kernel by its key and runs it
// from the registry of the kernel set under test. A test binary links the
// test sources plus one file defining kernel_sets_under_test() (here
// portable_kernel_sets.cpp); an optimized library reuses the same sources.
#pragma once

#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "core/status.h"
#include "runtime/evalue.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace hf2pte::kernels::testing {

/// A kernel library under test. Its registry must be complete (an optimized
/// set registers its kernels over the portable ones, as ExecuTorch's
/// optimized library falls back to portable).
struct KernelSet {
  std::string name;
  const rt::KernelRegistry& (*registry)();
  double float_tol = 1e-6;  ///< absolute + relative tolerance for f32 results
};

/// Test names print the set's name rather than its bytes.
inline void PrintTo(const KernelSet& s, std::ostream* os) { *os << s.name; }

/// Defined once per test binary.
std::vector<KernelSet> kernel_sets_under_test();

template <typename T>
constexpr ScalarType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return ScalarType::kFloat;
  else if constexpr (std::is_same_v<T, int64_t>) return ScalarType::kLong;
  else if constexpr (std::is_same_v<T, int32_t>) return ScalarType::kInt;
  else if constexpr (std::is_same_v<T, bool>) return ScalarType::kBool;
  else if constexpr (std::is_same_v<T, BFloat16>) return ScalarType::kBFloat16;
  else if constexpr (std::is_same_v<T, Half>) return ScalarType::kHalf;
  else static_assert(!sizeof(T), "unsupported test element type");
}

/// Builds the tensors and EValues of one kernel call and owns their memory
/// (a TensorFactory in ExecuTorch's terms). Returned pointers stay valid for
/// the arena's lifetime.
class ArgArena {
 public:
  /// A tensor holding `values` in row-major logical order, laid out in memory
  /// by `dim_order` (empty = contiguous). Static shape.
  template <typename T>
  rt::EValue* tensor(std::vector<int64_t> sizes, const std::vector<T>& values,
                     std::vector<uint8_t> dim_order = {}) {
    int64_t numel = 1;
    for (int64_t s : sizes) numel *= s;
    EXPECT_EQ(int64_t(values.size()), numel) << "test bug: values do not fill the shape";
    rt::Tensor* t = make_tensor(dtype_of<T>(), std::move(sizes), std::move(dim_order),
                                size_t(numel) * sizeof(T), rt::ShapeDynamism::kStatic);
    T* p = t->data<T>();
    for_each_logical(*t, [&](int64_t k, int64_t off) {
      if (size_t(k) < values.size()) p[off] = T(values[size_t(k)]);
    });
    return wrap(t);
  }

  /// An out tensor planned with upper-bound `sizes` (capacity = their bytes),
  /// filled with a 0x7f pattern so unwritten elements show up.
  rt::EValue* out(ScalarType dtype, std::vector<int64_t> sizes,
                  rt::ShapeDynamism dynamism = rt::ShapeDynamism::kDynamicBound,
                  std::vector<uint8_t> dim_order = {}) {
    int64_t numel = 1;
    for (int64_t s : sizes) numel *= s;
    rt::Tensor* t = make_tensor(dtype, std::move(sizes), std::move(dim_order),
                                size_t(numel) * element_size(dtype), dynamism);
    std::memset(t->raw_data(), 0x7f, t->capacity_bytes());
    return wrap(t);
  }

  rt::EValue* i(int64_t v) { return push(rt::EValue::from_int(v)); }
  rt::EValue* d(double v) { return push(rt::EValue::from_double(v)); }
  rt::EValue* b(bool v) { return push(rt::EValue::from_bool(v)); }
  rt::EValue* none() { return push(rt::EValue{}); }
  rt::EValue* int_list(const std::vector<int64_t>& v) {
    rt::EValue e;
    e.tag = rt::Tag::kIntList;
    for (int64_t x : v) e.items.push_back(i(x));
    return push(std::move(e));
  }
  rt::EValue* tensor_list(std::vector<rt::EValue*> items) {
    rt::EValue e;
    e.tag = rt::Tag::kTensorList;
    e.items = std::move(items);
    return push(std::move(e));
  }
  /// nullptr items are None.
  rt::EValue* opt_tensor_list(std::vector<rt::EValue*> items) {
    rt::EValue e;
    e.tag = rt::Tag::kOptionalTensorList;
    for (auto* it : items) e.items.push_back(it ? it : none());
    return push(std::move(e));
  }

  /// Calls `f(logical_index, element_offset)` for every element of `t` in row-major order.
  template <typename F>
  static void for_each_logical(const rt::Tensor& t, F&& f) {
    const int rank = t.dim();
    std::vector<int64_t> idx(size_t(rank), 0);
    for (int64_t k = 0; k < t.numel(); ++k) {
      int64_t off = 0;
      for (int d = 0; d < rank; ++d) off += idx[size_t(d)] * t.strides()[size_t(d)];
      f(k, off);
      for (int d = rank - 1; d >= 0; --d) {
        if (++idx[size_t(d)] < t.sizes()[size_t(d)]) break;
        idx[size_t(d)] = 0;
      }
    }
  }

 private:
  rt::Tensor* make_tensor(ScalarType dtype, std::vector<int64_t> sizes,
                          std::vector<uint8_t> dim_order, size_t bytes,
                          rt::ShapeDynamism dynamism) {
    // uint64_t storage keeps every element type aligned.
    auto& buf = storage_.emplace_back((bytes + 7) / 8 + 1, 0);
    return &tensors_.emplace_back(dtype, std::move(sizes), std::move(dim_order), buf.data(),
                                  bytes, dynamism);
  }
  rt::EValue* wrap(rt::Tensor* t) {
    rt::EValue e;
    e.tag = rt::Tag::kTensor;
    e.tensor = t;
    return push(std::move(e));
  }
  rt::EValue* push(rt::EValue e) { return &values_.emplace_back(std::move(e)); }

  std::deque<std::vector<uint64_t>> storage_;
  std::deque<rt::Tensor> tensors_;
  std::deque<rt::EValue> values_;
};

/// Reads a tensor's elements in row-major logical order.
template <typename T>
std::vector<T> values_of(const rt::Tensor& t) {
  std::vector<T> v;
  const uint8_t* base = static_cast<const uint8_t*>(t.raw_data());
  ArgArena::for_each_logical(t, [&](int64_t, int64_t off) {
    T x;
    std::memcpy(&x, base + size_t(off) * sizeof(T), sizeof(T));
    v.push_back(x);
  });
  return v;
}

/// Checks dtype, shape and values (floats within `tol` absolute + relative;
/// NaN matches NaN; infinities must match exactly).
template <typename T>
::testing::AssertionResult tensor_matches(const rt::EValue* ev, const std::vector<int64_t>& sizes,
                                          const std::vector<T>& expected, double tol = 1e-6) {
  if (ev == nullptr || ev->tag != rt::Tag::kTensor || ev->tensor == nullptr) {
    return ::testing::AssertionFailure() << "not a tensor";
  }
  const rt::Tensor& t = *ev->tensor;
  if (t.dtype() != dtype_of<T>()) {
    return ::testing::AssertionFailure() << "dtype " << scalar_type_name(t.dtype()) << ", expected "
                                         << scalar_type_name(dtype_of<T>());
  }
  std::vector<int64_t> got_sizes(t.sizes().begin(), t.sizes().end());
  if (got_sizes != sizes) {
    return ::testing::AssertionFailure()
           << "shape " << ::testing::PrintToString(got_sizes) << ", expected "
           << ::testing::PrintToString(sizes);
  }
  const std::vector<T> got = values_of<T>(t);
  if (got.size() != expected.size()) {
    return ::testing::AssertionFailure() << "test bug: " << expected.size()
                                         << " expected values for " << got.size() << " elements";
  }
  for (size_t k = 0; k < got.size(); ++k) {
    bool ok;
    if constexpr (std::is_floating_point_v<T>) {
      const double g = got[k], e = expected[k];
      ok = (std::isnan(g) && std::isnan(e)) || g == e ||
           (std::isfinite(e) && std::fabs(g - e) <= tol * (1.0 + std::fabs(e)));
    } else {
      ok = got[k] == expected[k];
    }
    if (!ok) {
      return ::testing::AssertionFailure()
             << "element " << k << " is " << ::testing::PrintToString(got[k]) << ", expected "
             << ::testing::PrintToString(expected[k]) << "; all: " << ::testing::PrintToString(got);
    }
  }
  return ::testing::AssertionSuccess();
}

/// The fixture: each test names kernels by key and runs them from the
/// parameter's registry.
class OpTest : public ::testing::TestWithParam<KernelSet> {
 protected:
  /// Runs kernel `key` on `args` (schema args then the return slot).
  Status run(std::string_view key, std::vector<rt::EValue*> args) {
    const rt::KernelFn* fn = GetParam().registry().find(key);
    if (fn == nullptr) {
      return make_error(ErrorCode::kNotFound, "kernel set '{}' has no kernel {}", GetParam().name,
                        key);
    }
    rt::KernelContext ctx{key};
    return (*fn)(ctx, args);
  }
  double tol() const { return GetParam().float_tol; }

  ArgArena a;
};

#define HF2PTE_EXPECT_OK(expr)                                      \
  do {                                                              \
    ::hf2pte::Status _st = (expr);                                  \
    EXPECT_TRUE(_st.is_ok()) << _st.message();                      \
  } while (0)

/// Expects an error of class `ecode` (e.g. kOutOfRange) whose message contains `substr`.
#define HF2PTE_EXPECT_ERROR(expr, ecode, substr)                                       \
  do {                                                                                 \
    ::hf2pte::Status _st = (expr);                                                     \
    EXPECT_EQ(_st.code(), ::hf2pte::ErrorCode::ecode) << "message: " << _st.message(); \
    EXPECT_NE(_st.message().find(substr), std::string::npos) << _st.message();        \
  } while (0)

/// Instantiates a test suite for every kernel set of this binary.
#define HF2PTE_INSTANTIATE_OP_TESTS(Suite)                                                  \
  INSTANTIATE_TEST_SUITE_P(                                                                 \
      Kernels, Suite, ::testing::ValuesIn(::hf2pte::kernels::testing::kernel_sets_under_test()), \
      [](const ::testing::TestParamInfo<::hf2pte::kernels::testing::KernelSet>& info) {     \
        return info.param.name;                                                             \
      })

}  // namespace hf2pte::kernels::testing
