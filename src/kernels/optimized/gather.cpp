// Data-movement and elementwise kernels for the second-wave graphs.
// index_select with a 1-D i64 index on contiguous tensors: every (outer,
// index) pair is one memcpy of the rows below `dim` (Mamba's scan shifts
// [S, D, N] blocks by rows, the RoPE tables pick rows). Anything else, and
// every out-of-range index (for its error), is the portable kernel's.
#include <cmath>
#include <cstring>

#include "kernels/optimized/optimized_ops.h"
#include "kernels/optimized/thread_pool.h"
#include "kernels/portable/kernels.h"

namespace hf2pte::kernels {

// [self, dim, index, out, ret]
Status index_select_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 5 || !args[0]->is_tensor() || !args[1]->is_int() || !args[2]->is_tensor() || !args[3]->is_tensor()) {
    return kernels::IndexSelectOut(ctx, args);
  }
  const rt::Tensor& self = *args[0]->tensor;
  const rt::Tensor& index = *args[2]->tensor;
  rt::Tensor& out = *args[3]->tensor;
  const int rank = self.dim();
  int64_t dim = args[1]->i;
  if (dim < 0) dim += rank;
  if (rank == 0 || dim < 0 || dim >= rank || self.dtype() != out.dtype() || !self.is_contiguous() ||
      self.raw_data() == nullptr || index.dtype() != ScalarType::kLong || index.dim() != 1 || !index.is_contiguous()) {
    return kernels::IndexSelectOut(ctx, args);
  }
  const int64_t n = index.size(0), size_d = self.size(int(dim));
  const int64_t* idx = index.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] < -size_d || idx[i] >= size_d) return kernels::IndexSelectOut(ctx, args);
  }
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  shape[size_t(dim)] = n;
  if (!out.resize(shape) || !out.is_contiguous()) return kernels::IndexSelectOut(ctx, args);
  int64_t outer = 1;
  size_t row = element_size(self.dtype());
  for (int64_t d = 0; d < dim; ++d) outer *= self.size(int(d));
  for (int64_t d = dim + 1; d < rank; ++d) row *= size_t(self.size(int(d)));
  const auto* src = static_cast<const uint8_t*>(self.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = idx[i] < 0 ? idx[i] + size_d : idx[i];
      std::memcpy(dst + size_t(o * n + i) * row, src + size_t(o * size_d + at) * row, row);
    }
  }
  if (args[4] != args[3]) *args[4] = *args[3];
  return Status::ok();
}

namespace {

// A unary f32 op on contiguous tensors in float (the portable kernels go
// through double; same result to float rounding), split over the pool.
template <typename Fn>
Status unary_f32(rt::KernelContext& ctx, std::span<rt::EValue*> args, PortableKernelFn portable, Fn fn) {
  if (args.size() != 3 || !args[0]->is_tensor() || !args[1]->is_tensor()) return portable(ctx, args);
  const rt::Tensor& self = *args[0]->tensor;
  rt::Tensor& out = *args[1]->tensor;
  if (self.dtype() != ScalarType::kFloat || out.dtype() != ScalarType::kFloat || !self.is_contiguous() ||
      self.raw_data() == nullptr) {
    return portable(ctx, args);
  }
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  if (!out.resize(shape) || !out.is_contiguous()) return portable(ctx, args);
  const float* x = self.data<float>();
  float* y = out.data<float>();
  parallel_for(self.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = fn(x[i]);
  });
  if (args[2] != args[1]) *args[2] = *args[1];
  return Status::ok();
}

}  // namespace

Status exp_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  return unary_f32(ctx, args, &kernels::ExpOut, [](float v) { return std::exp(v); });
}

// ViT's and BERT's exact GELU: erf of every activation.
Status erf_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  return unary_f32(ctx, args, &kernels::ErfOut, [](float v) { return std::erf(v); });
}

// clamp on contiguous f32 with Double/Int/None bounds (ResNet's ReLU, gpt-oss's
// limits): one min/max pass, NaN kept (x is compared first), threaded.
Status clamp_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 5 || !args[0]->is_tensor() || !args[3]->is_tensor()) return kernels::ClampOut(ctx, args);
  const rt::Tensor& self = *args[0]->tensor;
  rt::Tensor& out = *args[3]->tensor;
  auto bound = [](const rt::EValue* v, float none, float* b) {
    if (v->is_none()) return *b = none, true;
    if (v->tag == rt::Tag::kDouble) return *b = float(v->d), true;
    if (v->is_int()) return *b = float(v->i), true;
    return false;
  };
  float lo = 0, hi = 0;
  if (self.dtype() != ScalarType::kFloat || out.dtype() != ScalarType::kFloat || !self.is_contiguous() ||
      self.raw_data() == nullptr || !bound(args[1], -INFINITY, &lo) || !bound(args[2], INFINITY, &hi)) {
    return kernels::ClampOut(ctx, args);
  }
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  if (!out.resize(shape) || !out.is_contiguous()) return kernels::ClampOut(ctx, args);
  const float* x = self.data<float>();
  float* y = out.data<float>();
  parallel_for(self.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = x[i] < lo ? lo : x[i];
      y[i] = v > hi ? hi : v;
    }
  });
  if (args[4] != args[3]) *args[4] = *args[3];
  return Status::ok();
}

// [self, dim, keepdim, dtype, out, ret]
Status mean_out(rt::KernelContext& ctx, std::span<rt::EValue*> args) {
  if (args.size() != 6 || !args[0]->is_tensor() || !args[4]->is_tensor() || !args[2]->is_bool() || !args[3]->is_none()) {
    return kernels::MeanOut(ctx, args);
  }
  const rt::Tensor& self = *args[0]->tensor;
  rt::Tensor& out = *args[4]->tensor;
  const int rank = self.dim();
  std::vector<int64_t> dims;
  bool none = false;
  if (rank == 0 || !rt::arg_int_list(args[1], "dim", &dims, true, &none) || none || dims.size() != 1 ||
      (dims[0] != rank - 1 && dims[0] != -1) || self.dtype() != ScalarType::kFloat || out.dtype() != ScalarType::kFloat ||
      !self.is_contiguous() || self.raw_data() == nullptr) {
    return kernels::MeanOut(ctx, args);
  }
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  const int64_t n = shape.back();
  if (args[2]->i != 0) {  // keepdim
    shape.back() = 1;
  } else {
    shape.pop_back();
  }
  if (n == 0 || !out.resize(shape) || !out.is_contiguous()) return kernels::MeanOut(ctx, args);
  const float* x = self.data<float>();
  float* y = out.data<float>();
  const int64_t rows = self.numel() / n;
  parallel_for(rows, rows * n >= (1 << 15) ? 1 : rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = x + r * n;
      double acc[8] = {};
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; ++j) acc[j] += double(row[i + j]);
      }
      for (; i < n; ++i) acc[0] += double(row[i]);
      const double sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
      y[r] = float(sum / double(n));
    }
  });
  if (args[5] != args[4]) *args[5] = *args[4];
  return Status::ok();
}

}  // namespace hf2pte::kernels
