#include "export/interpreter.h"

#include <cmath>
#include <cstring>
#include <algorithm>
#include <limits>
#include <random>

#include <fmt/format.h>

#include "kernels/portable/kernel_util.h"
#include "runtime/evalue.h"
#include "runtime/tensor.h"

namespace hf2pte::exp {

using graph::Arg;
using graph::ValueId;

/// A value's storage: exactly-sized host bytes and the runtime view over them.
struct GraphInterpreter::Slot {
  HostTensor host;
  rt::Tensor tensor;
  bool is_int = false;  // kSymInt values
  int64_t int_value = 0;

  /// Storage for `sizes` laid out in `dim_order` (empty: contiguous).
  void bind(ScalarType dtype, std::vector<int64_t> sizes, std::vector<uint8_t> dim_order = {}) {
    host.dtype = dtype;
    host.sizes = sizes;
    host.bytes.assign(size_t(std::max<int64_t>(host.numel(), 0)) * element_size(dtype), 0);
    if (dim_order.size() != sizes.size()) {
      dim_order.resize(sizes.size());
      for (size_t i = 0; i < dim_order.size(); ++i) dim_order[i] = uint8_t(i);
    }
    tensor = rt::Tensor(dtype, std::move(sizes), std::move(dim_order), host.bytes.data(), host.bytes.size(),
                        rt::ShapeDynamism::kDynamicBound);
  }
  /// The host copy (row-major) with the tensor's current (possibly resized) shape.
  HostTensor current() const;
};

namespace {

template <typename F>
void for_each_value(const graph::Node& n, F&& f) {
  for (const auto& a : n.args) {
    if (const auto* id = std::get_if<ValueId>(&a)) f(*id);
    if (const auto* l = std::get_if<graph::TensorList>(&a)) for (auto v : *l) f(v);
    if (const auto* l = std::get_if<graph::OptTensorList>(&a)) for (auto v : *l) if (v) f(*v);
  }
}

const float* fdata(const rt::Tensor& t) { return t.data<float>(); }

/// Index of `out_index` (a multi-index of `out_sizes`) in a tensor of `sizes`
/// broadcast against it (right-aligned, size-1 dims repeat).
int64_t broadcast_offset(const std::vector<int64_t>& out_index, std::span<const int64_t> sizes) {
  int64_t off = 0, stride = 1;
  size_t r = sizes.size(), n = out_index.size();
  for (size_t i = 0; i < r; ++i) {
    size_t d = r - 1 - i;
    int64_t idx = sizes[d] == 1 ? 0 : out_index[n - 1 - i];
    off += idx * stride;
    stride *= sizes[d];
  }
  return off;
}

Status require_f32(const rt::Tensor& t, const char* what) {
  HF2PTE_CHECK_OR_RETURN(t.dtype() == ScalarType::kFloat, kNotSupported,
                         "reference interpreter: {} must be f32, got {}", what, scalar_type_name(t.dtype()));
  return Status::ok();
}

// y[m, n] = sum_k x[m, k] w[n, k] + b[n]
Status ref_linear(const rt::Tensor& x, const rt::Tensor& w, const rt::Tensor* b, rt::Tensor& y) {
  HF2PTE_RETURN_IF_ERROR(require_f32(x, "linear input"));
  HF2PTE_RETURN_IF_ERROR(require_f32(w, "linear weight"));
  int64_t K = w.size(1), N = w.size(0), M = x.numel() / std::max<int64_t>(K, 1);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double acc = b ? double(fdata(*b)[n]) : 0.0;
      for (int64_t k = 0; k < K; ++k) acc += double(fdata(x)[m * K + k]) * double(fdata(w)[n * K + k]);
      y.data<float>()[m * N + n] = float(acc);
    }
  }
  return Status::ok();
}

// y = x / sqrt(mean(x^2) + eps) * w over the last dim
Status ref_rms_norm(const rt::Tensor& x, const rt::Tensor* w, double eps, rt::Tensor& y) {
  HF2PTE_RETURN_IF_ERROR(require_f32(x, "rms_norm input"));
  int64_t D = x.size(-1), rows = x.numel() / std::max<int64_t>(D, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = fdata(x) + r * D;
    double ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += double(in[i]) * double(in[i]);
    double inv = 1.0 / std::sqrt(ss / double(D) + eps);
    for (int64_t i = 0; i < D; ++i) {
      double v = double(in[i]) * inv;
      y.data<float>()[r * D + i] = float(w ? v * double(fdata(*w)[i]) : v);
    }
  }
  return Status::ok();
}

Status ref_silu(const rt::Tensor& x, rt::Tensor& y) {
  HF2PTE_RETURN_IF_ERROR(require_f32(x, "silu input"));
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = fdata(x)[i];
    y.data<float>()[i] = float(v / (1.0 + std::exp(-v)));
  }
  return Status::ok();
}

// softmax(q k^T * scale + mask) v with GQA (query head h uses kv head h / group).
Status ref_sdpa(const rt::Tensor& q, const rt::Tensor& k, const rt::Tensor& v, const rt::Tensor* mask, bool causal,
                double scale, rt::Tensor& y) {
  HF2PTE_RETURN_IF_ERROR(require_f32(q, "sdpa query"));
  int r = q.dim();
  int64_t Hq = q.size(r - 3), L = q.size(r - 2), D = q.size(r - 1);
  int64_t Hkv = k.size(r - 3), S = k.size(r - 2), Dv = v.size(r - 1);
  int64_t B = q.numel() / (Hq * L * D);
  int64_t group = Hq / std::max<int64_t>(Hkv, 1);
  std::vector<double> p(static_cast<size_t>(S));
  std::vector<int64_t> idx(static_cast<size_t>(r), 0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t hk = h / group;
      for (int64_t i = 0; i < L; ++i) {
        const float* qi = fdata(q) + ((b * Hq + h) * L + i) * D;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < S; ++j) {
          const float* kj = fdata(k) + ((b * Hkv + hk) * S + j) * D;
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += double(qi[d]) * double(kj[d]);
          s *= scale;
          if (causal && j > i) s = -std::numeric_limits<double>::infinity();
          if (mask) {
            // Mask broadcast against [B..., Hq, L, S]; b unflattens into the leading dims.
            for (int64_t d = r - 4, rest = b; d >= 0; --d) idx[size_t(d)] = rest % q.size(int(d)), rest /= q.size(int(d));
            idx[size_t(r - 3)] = h, idx[size_t(r - 2)] = i, idx[size_t(r - 1)] = j;
            int64_t off = broadcast_offset(idx, mask->sizes());
            if (mask->dtype() == ScalarType::kBool) {
              if (!mask->data<bool>()[off]) s = -std::numeric_limits<double>::infinity();
            } else {
              s += double(mask->data<float>()[off]);
            }
          }
          p[size_t(j)] = s;
          mx = std::max(mx, s);
        }
        double sum = 0;
        for (auto& x : p) sum += (x = std::exp(x - mx));
        float* out = y.data<float>() + ((b * Hq + h) * L + i) * Dv;
        for (int64_t d = 0; d < Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j) acc += p[size_t(j)] * double(fdata(v)[((b * Hkv + hk) * S + j) * Dv + d]);
          out[d] = float(acc / sum);
        }
      }
    }
  }
  return Status::ok();
}


// ---- layout helpers: graph ops compute on row-major data ----

/// dst[idx] = src[idx] for every index of src's sizes, each through its own strides.
void copy_logical(const rt::Tensor& src, rt::Tensor& dst) {
  if (src.is_contiguous() && dst.is_contiguous()) {
    if (src.nbytes() > 0) std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
    return;
  }
  const size_t es = element_size(src.dtype());
  const auto* in = static_cast<const uint8_t*>(src.raw_data());
  auto* out = static_cast<uint8_t*>(dst.raw_data());
  kernels::for_each_offset<2>(src.sizes(), std::array<kernels::DimArray, 2>{kernels::strides_of(dst), kernels::strides_of(src)},
                              [&](const std::array<int64_t, 2>& o) {
                                std::memcpy(out + size_t(o[0]) * es, in + size_t(o[1]) * es, es);
                              });
}

/// Row-major elements [begin, end) of `sizes` read through `strides` from `src`
/// starting at element `offset`, written row-major into dst.
void copy_view(const rt::Tensor& src, std::span<const int64_t> sizes, const kernels::DimArray& strides, int64_t offset,
               rt::Tensor& dst) {
  const size_t es = element_size(src.dtype());
  const auto* in = static_cast<const uint8_t*>(src.raw_data()) + size_t(offset) * es;
  auto* out = static_cast<uint8_t*>(dst.raw_data());
  kernels::for_each_offset<2>(sizes, std::array<kernels::DimArray, 2>{kernels::strides_of(dst), strides},
                              [&](const std::array<int64_t, 2>& o) {
                                std::memcpy(out + size_t(o[0]) * es, in + size_t(o[1]) * es, es);
                              });
}

/// Element i (row-major, contiguous tensor) as a double.
double at(const rt::Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case ScalarType::kFloat: return t.data<float>()[i];
    case ScalarType::kLong: return double(t.data<int64_t>()[i]);
    case ScalarType::kInt: return t.data<int32_t>()[i];
    case ScalarType::kBool: return t.data<uint8_t>()[i] != 0 ? 1.0 : 0.0;
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

void put_index(rt::Tensor& t, int64_t i, int64_t v) {
  if (t.dtype() == ScalarType::kInt) {
    t.data<int32_t>()[i] = int32_t(v);
  } else {
    t.data<int64_t>()[i] = v;
  }
}

void copy_element(const rt::Tensor& src, int64_t i, rt::Tensor& dst, int64_t j) {
  const size_t es = element_size(src.dtype());
  std::memcpy(static_cast<uint8_t*>(dst.raw_data()) + size_t(j) * es, static_cast<const uint8_t*>(src.raw_data()) + size_t(i) * es, es);
}

/// Sizes before / at / after `dim` of a contiguous tensor: index = (o * n + j) * inner + in.
struct Axis {
  int64_t outer = 1, n = 1, inner = 1;
};
Axis axis_of(const rt::Tensor& t, int dim) {
  Axis a;
  for (int i = 0; i < t.dim(); ++i) {
    if (i < dim) a.outer *= t.size(i);
    else if (i == dim) a.n = t.size(i);
    else a.inner *= t.size(i);
  }
  return a;
}

int norm_dim(int64_t d, int rank) { return int(d < 0 ? d + std::max(rank, 1) : d); }

// ---- direct implementations of the decomposition sources (items 5-18) ----

// Pieces along `dim` in order, each as long as its output.
Status ref_split(const rt::Tensor& x, int dim, std::span<rt::Tensor*> outs) {
  const auto xs = kernels::strides_of(x);
  int64_t start = 0;
  for (rt::Tensor* o : outs) {
    copy_view(x, o->sizes(), xs, start * xs[size_t(dim)], *o);
    start += o->size(dim);
  }
  return Status::ok();
}

// The k largest (smallest) along dim, in order; equal values keep index order.
Status ref_topk(const rt::Tensor& x, int dim, bool largest, rt::Tensor& values, rt::Tensor& indices) {
  Axis a = axis_of(x, dim);
  int64_t k = values.size(dim);
  std::vector<int64_t> order(static_cast<size_t>(a.n));
  for (int64_t o = 0; o < a.outer; ++o) {
    for (int64_t in = 0; in < a.inner; ++in) {
      auto val = [&](int64_t j) { return at(x, (o * a.n + j) * a.inner + in); };
      for (int64_t j = 0; j < a.n; ++j) order[size_t(j)] = j;
      std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return largest ? val(p) > val(q) : val(p) < val(q); });
      for (int64_t r = 0; r < k; ++r) {
        int64_t dst = (o * k + r) * a.inner + in;
        copy_element(x, (o * a.n + order[size_t(r)]) * a.inner + in, values, dst);
        indices.data<int64_t>()[dst] = order[size_t(r)];
      }
    }
  }
  return Status::ok();
}

// torch avg_pool2d: window [h*s - p, h*s - p + k) clipped to the padded input for
// the divisor (count_include_pad) and to the input for the sum.
Status ref_avg_pool2d(const rt::Tensor& x, const int64_t kernel[2], const int64_t s[2], const int64_t p[2], bool include_pad,
                      std::optional<int64_t> divisor, rt::Tensor& y) {
  HF2PTE_RETURN_IF_ERROR(require_f32(x, "avg_pool2d input"));
  const int r = x.dim();
  const int64_t H = x.size(r - 2), W = x.size(r - 1), OH = y.size(r - 2), OW = y.size(r - 1);
  const int64_t planes = x.numel() / std::max<int64_t>(H * W, 1);
  // A window larger than the padded input is clamped to it (the seed's rule).
  const int64_t k[2] = {std::min(kernel[0], H + 2 * p[0]), std::min(kernel[1], W + 2 * p[1])};
  for (int64_t c = 0; c < planes; ++c) {
    for (int64_t i = 0; i < OH; ++i) {
      for (int64_t j = 0; j < OW; ++j) {
        int64_t h0 = i * s[0] - p[0], w0 = j * s[1] - p[1];
        int64_t h1 = std::min(h0 + k[0], H + p[0]), w1 = std::min(w0 + k[1], W + p[1]);
        int64_t pool = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, H), w1 = std::min(w1, W);
        double sum = 0;
        for (int64_t h = h0; h < h1; ++h) for (int64_t w = w0; w < w1; ++w) sum += fdata(x)[(c * H + h) * W + w];
        double div = divisor ? double(*divisor) : include_pad ? double(pool) : double((h1 - h0) * (w1 - w0));
        y.data<float>()[(c * OH + i) * OW + j] = float(sum / div);
      }
    }
  }
  return Status::ok();
}

// torch adaptive_avg_pool2d: cell (i, j) averages rows [floor(i*H/OH), ceil((i+1)*H/OH)) and likewise columns.
Status ref_adaptive_avg_pool2d(const rt::Tensor& x, rt::Tensor& y) {
  HF2PTE_RETURN_IF_ERROR(require_f32(x, "adaptive_avg_pool2d input"));
  const int r = x.dim();
  const int64_t H = x.size(r - 2), W = x.size(r - 1), OH = y.size(r - 2), OW = y.size(r - 1);
  const int64_t planes = x.numel() / std::max<int64_t>(H * W, 1);
  for (int64_t c = 0; c < planes; ++c) {
    for (int64_t i = 0; i < OH; ++i) {
      int64_t h0 = int64_t(std::floor(double(i * H) / double(OH))), h1 = int64_t(std::ceil(double((i + 1) * H) / double(OH)));
      for (int64_t j = 0; j < OW; ++j) {
        int64_t w0 = int64_t(std::floor(double(j * W) / double(OW))), w1 = int64_t(std::ceil(double((j + 1) * W) / double(OW)));
        double sum = 0;
        for (int64_t h = h0; h < h1; ++h) for (int64_t w = w0; w < w1; ++w) sum += fdata(x)[(c * H + h) * W + w];
        y.data<float>()[(c * OH + i) * OW + j] = float(sum / double((h1 - h0) * (w1 - w0)));
      }
    }
  }
  return Status::ok();
}

// searchsorted: per value, the first index i of its sorted row with row[i] >= v
// (row[i] > v when right), found by binary search; a 1-D row is shared.
Status ref_searchsorted(const rt::Tensor& seq, const rt::Tensor& v, bool right, rt::Tensor& y) {
  const int64_t M = seq.dim() == 0 ? 1 : seq.size(-1);
  const int64_t K = v.dim() == 0 ? 1 : v.size(-1);
  std::vector<double> row(static_cast<size_t>(M));
  for (int64_t i = 0; i < v.numel(); ++i) {
    const int64_t base = seq.dim() <= 1 ? 0 : (i / K) * M;
    for (int64_t m = 0; m < M; ++m) row[size_t(m)] = at(seq, base + m);
    const double val = at(v, i);
    auto it = right ? std::upper_bound(row.begin(), row.end(), val) : std::lower_bound(row.begin(), row.end(), val);
    put_index(y, i, int64_t(it - row.begin()));
  }
  return Status::ok();
}

// cummax/cummin: a running scan along dim; ties move the index forward (>= / <=).
Status ref_cumulative(const rt::Tensor& x, int dim, bool is_max, rt::Tensor& values, rt::Tensor& indices) {
  Axis a = axis_of(x, dim);
  for (int64_t o = 0; o < a.outer; ++o) {
    for (int64_t in = 0; in < a.inner; ++in) {
      int64_t best = 0;
      for (int64_t j = 0; j < a.n; ++j) {
        const int64_t at_j = (o * a.n + j) * a.inner + in;
        const double v = at(x, at_j), b = at(x, (o * a.n + best) * a.inner + in);
        if (j == 0 || (is_max ? v >= b : v <= b)) best = j;
        copy_element(x, (o * a.n + best) * a.inner + in, values, at_j);
        indices.data<int64_t>()[at_j] = best;
      }
    }
  }
  return Status::ok();
}

// bernoulli: 1 with probability p (p_i from the tensor itself when p is absent).
Status ref_bernoulli(const rt::Tensor& x, std::optional<double> p, rt::Tensor& y) {
  HF2PTE_RETURN_IF_ERROR(require_f32(x, "bernoulli input"));
  std::mt19937_64 gen(std::random_device{}());
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = u(gen) < (p ? *p : double(fdata(x)[i])) ? 1.0f : 0.0f;
  return Status::ok();
}

// expand: every out index reads the input at the same index, 0 on broadcast dims.
Status ref_expand(const rt::Tensor& x, rt::Tensor& y) {
  copy_view(x, y.sizes(), kernels::broadcast_strides(x, y.sizes()), 0, y);
  return Status::ok();
}

// permute: out index (i_0..i_r) reads in at i_{p^-1}: out dim k walks in dim p[k].
Status ref_permute(const rt::Tensor& x, const std::vector<int>& p, rt::Tensor& y) {
  const auto xs = kernels::strides_of(x);
  kernels::DimArray st{};
  for (size_t k = 0; k < p.size(); ++k) st[k] = xs[size_t(p[k])];
  copy_view(x, y.sizes(), st, 0, y);
  return Status::ok();
}

// reshape/view/detach: the same row-major elements.
Status ref_same_elements(const rt::Tensor& x, rt::Tensor& y) {
  std::memcpy(y.raw_data(), x.raw_data(), x.nbytes());
  return Status::ok();
}

int64_t const_of(const Arg& a) {
  if (const auto* i = std::get_if<int64_t>(&a)) return *i;
  if (const auto* s = std::get_if<graph::SymInt>(&a); s && s->is_constant()) return s->constant_value();
  return 0;
}

}  // namespace

HostTensor GraphInterpreter::Slot::current() const {
  HostTensor t{host.dtype, std::vector<int64_t>(tensor.sizes().begin(), tensor.sizes().end()), {}};
  t.bytes.assign(tensor.nbytes(), 0);
  rt::Tensor dst(t.dtype, t.sizes, {}, t.bytes.data(), t.bytes.size(), rt::ShapeDynamism::kDynamicBound);
  copy_logical(tensor, dst);
  return t;
}

GraphInterpreter::GraphInterpreter(const graph::Graph& g, const rt::KernelRegistry& kernels) : g_(g), kernels_(kernels) {
  for (size_t i = 0; i < g.nodes().size(); ++i) for_each_value(g.nodes()[i], [&](ValueId v) { last_use_[v] = i; });
  for (auto v : g.outputs()) last_use_[v] = SIZE_MAX;
}

GraphInterpreter::~GraphInterpreter() = default;

Result<GraphInterpreter::Slot*> GraphInterpreter::slot(ValueId v) {
  if (auto it = slots_.find(v); it != slots_.end()) return it->second.get();
  const auto& val = g_.value(v);
  auto s = std::make_unique<Slot>();
  if (val.role == graph::ValueRole::kConstant) {
    const auto& c = g_.constant(v);
    s->bind(c.dtype, c.sizes);
    size_t at = 0;
    HF2PTE_RETURN_IF_ERROR(c.write([&](const void* d, size_t n) -> Status {
      HF2PTE_CHECK_OR_RETURN(at + n <= s->host.bytes.size(), kInternal, "constant %{} wrote too many bytes", val.name);
      if (n != 0) std::memcpy(s->host.bytes.data() + at, d, n);
      at += n;
      return Status::ok();
    }));
  } else if (val.role == graph::ValueRole::kBuffer) {
    std::vector<int64_t> sizes;
    for (const auto& d : val.type.sizes) sizes.push_back(d.upper_bound(g_.dims()));
    s->bind(val.type.dtype, sizes);  // zeros
  } else {
    return make_error(ErrorCode::kInternal, "reference interpreter: %{} is used before it is computed", val.name);
  }
  return (slots_[v] = std::move(s)).get();
}

Result<std::vector<HostTensor>> GraphInterpreter::run(const std::vector<HostTensor>& inputs) {
  HF2PTE_CHECK_OR_RETURN(inputs.size() == g_.inputs().size(), kInvalidArgument, "graph {} takes {} inputs; got {}",
                         g_.name(), g_.inputs().size(), inputs.size());
  // Drop everything but persistent buffers from the previous call.
  for (auto it = slots_.begin(); it != slots_.end();) {
    it = g_.value(it->first).role == graph::ValueRole::kBuffer ? std::next(it) : slots_.erase(it);
  }
  env_.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    ValueId v = g_.inputs()[i];
    const auto& t = g_.type(v);
    HF2PTE_CHECK_OR_RETURN(inputs[i].dtype == t.dtype && int(inputs[i].sizes.size()) == t.rank(), kInvalidArgument,
                           "input {} must be {}", i, t.str());
    for (int d = 0; d < t.rank(); ++d) {
      const auto& s = t.sizes[size_t(d)];
      if (s.kind() == graph::SymInt::Kind::kDim) env_[s.dim_name()] = inputs[i].sizes[size_t(d)];
    }
    auto s = std::make_unique<Slot>();
    s->bind(inputs[i].dtype, inputs[i].sizes, t.dim_order);
    HF2PTE_CHECK_OR_RETURN(inputs[i].bytes.size() == s->host.bytes.size(), kInvalidArgument,
                           "input {} has {} bytes; {} needs {}", i, inputs[i].bytes.size(), t.str(), s->host.bytes.size());
    // Inputs arrive row-major; a strided input type stores them in its dim order.
    auto row_major = inputs[i];
    rt::Tensor src(row_major.dtype, row_major.sizes, {}, row_major.bytes.data(), row_major.bytes.size(),
                   rt::ShapeDynamism::kDynamicBound);
    copy_logical(src, s->tensor);
    slots_[v] = std::move(s);
  }
  for (size_t i = 0; i < g_.nodes().size(); ++i) {
    HF2PTE_RETURN_IF_ERROR(run_node(i).with_context(fmt::format("node {}", g_.nodes()[i].name)));
    // Free values (constants included) after their last use to bound memory.
    for_each_value(g_.nodes()[i], [&](ValueId v) {
      auto role = g_.value(v).role;
      if (role != graph::ValueRole::kBuffer && last_use_[v] == i) slots_.erase(v);
    });
  }
  std::vector<HostTensor> outs;
  for (auto v : g_.outputs()) {
    HF2PTE_ASSIGN_OR_RETURN(Slot * s, slot(v));
    outs.push_back(s->current());
  }
  return outs;
}

Status GraphInterpreter::run_node(size_t index) {
  const graph::Node& n = g_.nodes()[index];
  // Outputs at their concrete sizes under the current dims.
  for (ValueId out : n.outputs) {
    const auto& val = g_.value(out);
    auto s = std::make_unique<Slot>();
    if (val.role == graph::ValueRole::kSymInt) {
      s->is_int = true;
    } else {
      std::vector<int64_t> sizes;
      for (const auto& d : val.type.sizes) {
        auto e = d.evaluate(env_);
        // A data-dependent size this node produces (nonzero's count): storage
        // at its declared bound; the kernel resizes, bind_unbacked names it.
        if (!e && d.kind() == graph::SymInt::Kind::kUnbacked && d.upper_bound(g_.dims()) != graph::DimRange::kUnbounded) {
          e = d.upper_bound(g_.dims());
        }
        HF2PTE_CHECK_OR_RETURN(e.has_value(), kInternal, "size {} of %{} cannot be evaluated", d.str(), val.name);
        sizes.push_back(*e);
      }
      s->bind(val.type.dtype, std::move(sizes), val.type.dim_order);
    }
    slots_[out] = std::move(s);
  }
  auto tensor_of = [&](const Arg& a) -> Result<rt::Tensor*> {
    const auto* id = std::get_if<ValueId>(&a);
    if (id == nullptr) return static_cast<rt::Tensor*>(nullptr);
    HF2PTE_ASSIGN_OR_RETURN(Slot * s, slot(*id));
    return &s->tensor;
  };

  if (!op_info(n.op).has_kernel) {
    // Graph ops compute on row-major data: strided inputs are gathered into
    // temporaries and strided outputs scattered back afterwards.
    std::vector<std::unique_ptr<Slot>> temps;
    auto row_major = [&](rt::Tensor* t, bool fill) -> rt::Tensor* {
      if (t == nullptr || t->is_contiguous()) return t;
      auto tmp = std::make_unique<Slot>();
      tmp->bind(t->dtype(), std::vector<int64_t>(t->sizes().begin(), t->sizes().end()));
      if (fill) copy_logical(*t, tmp->tensor);
      temps.push_back(std::move(tmp));
      return &temps.back()->tensor;
    };
    auto input = [&](size_t i) -> Result<rt::Tensor*> {
      HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * t, tensor_of(n.args[i]));
      return row_major(t, true);
    };
    std::vector<rt::Tensor*> outs;
    for (ValueId o : n.outputs) outs.push_back(row_major(&slots_[o]->tensor, false));
    HF2PTE_RETURN_IF_ERROR(run_reference(n, input, outs));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      rt::Tensor& dst = slots_[n.outputs[i]]->tensor;
      if (outs[i] != &dst) copy_logical(*outs[i], dst);
    }
    return Status::ok();
  }

  // Kernel ops: build KernelCall-style args exactly as the emitter lays them out.
  const auto& schema = op_schema(n.op);
  std::vector<std::unique_ptr<rt::EValue>> storage;
  auto make = [&](rt::EValue v) {
    storage.push_back(std::make_unique<rt::EValue>(std::move(v)));
    return storage.back().get();
  };
  auto int_value = [&](const graph::SymInt& s) -> Result<rt::EValue*> {
    auto e = s.evaluate(env_);
    HF2PTE_CHECK_OR_RETURN(e.has_value(), kInternal, "size {} cannot be evaluated", s.str());
    return make(rt::EValue::from_int(*e));
  };
  std::vector<rt::EValue*> args;
  size_t arg_i = 0, out_i = 0;
  for (const auto& a : schema.args) {
    if (a.is_out) {
      rt::EValue e;
      e.tag = rt::Tag::kTensor;
      e.tensor = &slots_[n.outputs[out_i++]]->tensor;
      args.push_back(make(std::move(e)));
      continue;
    }
    const Arg& arg = n.args[arg_i++];
    rt::EValue e;
    if (std::holds_alternative<graph::None>(arg)) {
      args.push_back(make(e));
    } else if (const auto* id = std::get_if<ValueId>(&arg)) {
      HF2PTE_ASSIGN_OR_RETURN(Slot * s, slot(*id));
      if (s->is_int) {
        args.push_back(make(rt::EValue::from_int(s->int_value)));
      } else {
        e.tag = rt::Tag::kTensor;
        e.tensor = &s->tensor;
        args.push_back(make(std::move(e)));
      }
    } else if (const auto* i = std::get_if<int64_t>(&arg)) {
      args.push_back(make(rt::EValue::from_int(*i)));
    } else if (const auto* d = std::get_if<double>(&arg)) {
      args.push_back(make(rt::EValue::from_double(*d)));
    } else if (const auto* b = std::get_if<bool>(&arg)) {
      args.push_back(make(rt::EValue::from_bool(*b)));
    } else if (const auto* s = std::get_if<graph::SymInt>(&arg)) {
      HF2PTE_ASSIGN_OR_RETURN(rt::EValue * iv, int_value(*s));
      args.push_back(iv);
    } else if (const auto* st = std::get_if<ScalarType>(&arg)) {
      args.push_back(make(rt::EValue::from_int(int64_t(*st))));
    } else if (const auto* l = std::get_if<graph::IntList>(&arg)) {
      e.tag = rt::Tag::kIntList;
      for (const auto& s : *l) {
        HF2PTE_ASSIGN_OR_RETURN(rt::EValue * iv, int_value(s));
        e.items.push_back(iv);
      }
      args.push_back(make(std::move(e)));
    } else if (const auto* l = std::get_if<graph::TensorList>(&arg)) {
      e.tag = rt::Tag::kTensorList;
      for (auto v : *l) {
        HF2PTE_ASSIGN_OR_RETURN(Slot * s, slot(v));
        rt::EValue t;
        t.tag = rt::Tag::kTensor;
        t.tensor = &s->tensor;
        e.items.push_back(make(std::move(t)));
      }
      args.push_back(make(std::move(e)));
    } else if (const auto* l = std::get_if<graph::OptTensorList>(&arg)) {
      e.tag = rt::Tag::kOptionalTensorList;
      for (const auto& v : *l) {
        if (!v) {
          e.items.push_back(nullptr);
          continue;
        }
        HF2PTE_ASSIGN_OR_RETURN(Slot * s, slot(*v));
        rt::EValue t;
        t.tag = rt::Tag::kTensor;
        t.tensor = &s->tensor;
        e.items.push_back(make(std::move(t)));
      }
      args.push_back(make(std::move(e)));
    } else {
      return make_error(ErrorCode::kInternal, "argument '{}' cannot be interpreted", a.name);
    }
  }
  // Return slot: the out for out variants, a fresh value for functional ops, self in place.
  if (schema.num_outs() >= 1) {
    args.push_back(args[schema.args.size() - 1]);
  } else {
    args.push_back(n.outputs.empty() ? args[0] : make(rt::EValue{}));
  }
  const std::string key = op_info(n.op).kernel_key();  // outlives ctx, which views it
  const rt::KernelFn* fn = kernels_.find(key);
  HF2PTE_CHECK_OR_RETURN(fn != nullptr, kNotFound, "no kernel for {}", key);
  rt::KernelContext ctx{key};
  HF2PTE_RETURN_IF_ERROR((*fn)(ctx, args));
  HF2PTE_RETURN_IF_ERROR(bind_unbacked(n));
  if (schema.num_outs() == 0 && !n.outputs.empty()) {
    Slot* out = slots_[n.outputs[0]].get();
    if (out->is_int) {
      out->int_value = args.back()->i;
      if (g_.value(n.outputs[0]).role == graph::ValueRole::kSymInt) {
        // Keep symbolic names that are plain dims consistent with the value.
        const auto& sym = g_.value(n.outputs[0]).sym;
        if (sym.kind() == graph::SymInt::Kind::kDim) env_[sym.dim_name()] = out->int_value;
      }
    }
  }
  return Status::ok();
}

Status GraphInterpreter::bind_unbacked(const graph::Node& n) {
  for (ValueId out : n.outputs) {
    const auto& val = g_.value(out);
    if (val.role == graph::ValueRole::kSymInt) continue;
    const rt::Tensor& t = slots_[out]->tensor;
    for (size_t d = 0; d < val.type.sizes.size(); ++d) {
      const auto& s = val.type.sizes[d];
      if (s.kind() != graph::SymInt::Kind::kUnbacked) continue;
      auto [it, fresh] = env_.emplace(s.dim_name(), t.size(int(d)));
      HF2PTE_CHECK_OR_RETURN(fresh || it->second == t.size(int(d)), kInternal,
                             "data-dependent size {} of %{} is {}, but {} elsewhere", s.str(), val.name, t.size(int(d)),
                             it->second);
    }
  }
  return Status::ok();
}

Status GraphInterpreter::run_reference(const graph::Node& n, const std::function<Result<rt::Tensor*>(size_t)>& input,
                                       std::span<rt::Tensor*> outs) {
  HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * x, input(0));
  rt::Tensor& y = *outs[0];
  switch (n.op) {
    case OpId::Linear: {
      HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * w, input(1));
      HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * b, input(2));
      return ref_linear(*x, *w, b, y);
    }
    case OpId::RmsNorm: {
      HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * w, input(2));
      double eps = std::holds_alternative<double>(n.args[3]) ? std::get<double>(n.args[3])
                                                             : double(std::numeric_limits<float>::epsilon());
      return ref_rms_norm(*x, w, eps, y);
    }
    case OpId::Silu:
      return ref_silu(*x, y);
    case OpId::ScaledDotProductAttention: {
      HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * k, input(1));
      HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * v, input(2));
      HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * mask, input(3));
      double scale = std::holds_alternative<double>(n.args[6]) ? std::get<double>(n.args[6])
                                                               : 1.0 / std::sqrt(double(x->size(-1)));
      return ref_sdpa(*x, *k, *v, mask, std::get<bool>(n.args[5]), scale, y);
    }
    case OpId::SplitTensor:
    case OpId::SplitWithSizes:
    case OpId::Chunk:
      return ref_split(*x, norm_dim(const_of(n.args[2]), x->dim()), outs);
    case OpId::Topk:
      return ref_topk(*x, norm_dim(const_of(n.args[2]), x->dim()), std::get<bool>(n.args[3]), y, *outs[1]);
    case OpId::Detach:
    case OpId::Reshape:
    case OpId::View:
      return ref_same_elements(*x, y);
    case OpId::AvgPool2d: {
      int64_t k[2], s[2], p[2];
      const auto& kl = std::get<graph::IntList>(n.args[1]);
      const auto& sl = std::get<graph::IntList>(n.args[2]);
      const auto& pl = std::get<graph::IntList>(n.args[3]);
      auto pick = [](const graph::IntList& l, size_t i, int64_t d) { return l.empty() ? d : l[l.size() == 1 ? 0 : i].constant_value(); };
      for (size_t i = 0; i < 2; ++i) k[i] = pick(kl, i, 1), s[i] = pick(sl, i, k[i]), p[i] = pick(pl, i, 0);
      std::optional<int64_t> divisor;
      if (!std::holds_alternative<graph::None>(n.args[6])) divisor = const_of(n.args[6]);
      return ref_avg_pool2d(*x, k, s, p, std::get<bool>(n.args[5]), divisor, y);
    }
    case OpId::AdaptiveAvgPool2d:
      return ref_adaptive_avg_pool2d(*x, y);
    case OpId::BucketizeTensor: {
      HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * b, input(1));
      return ref_searchsorted(*b, *x, std::get<bool>(n.args[3]), y);
    }
    case OpId::SearchsortedTensor: {
      HF2PTE_ASSIGN_OR_RETURN(rt::Tensor * v, input(1));
      return ref_searchsorted(*x, *v, std::get<bool>(n.args[3]), y);
    }
    case OpId::Cummax:
    case OpId::Cummin:
      return ref_cumulative(*x, norm_dim(const_of(n.args[1]), x->dim()), n.op == OpId::Cummax, y, *outs[1]);
    case OpId::Bernoulli:
      return ref_bernoulli(*x, std::nullopt, y);
    case OpId::BernoulliP:
      return ref_bernoulli(*x, std::get<double>(n.args[1]), y);
    case OpId::Expand:
      return ref_expand(*x, y);
    case OpId::Permute:
    case OpId::TransposeInt: {
      std::vector<int> p(static_cast<size_t>(x->dim()));
      for (int i = 0; i < x->dim(); ++i) p[size_t(i)] = i;
      if (n.op == OpId::Permute) {
        const auto& l = std::get<graph::IntList>(n.args[1]);
        for (size_t i = 0; i < p.size(); ++i) p[i] = norm_dim(l[i].constant_value(), x->dim());
      } else {
        std::swap(p[size_t(norm_dim(const_of(n.args[1]), x->dim()))], p[size_t(norm_dim(const_of(n.args[2]), x->dim()))]);
      }
      return ref_permute(*x, p, y);
    }
    default:
      return make_error(ErrorCode::kNotSupported, "reference interpreter has no implementation of {}",
                        op_info(n.op).kernel_key());
  }
}

}  // namespace hf2pte::exp
